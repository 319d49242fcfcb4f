/*
 * aclnn/aclnn_base.h - the base of every aclnn operator header.
 */
#ifndef ACLNN_SDK_ACLNN_ACLNN_BASE_H
#define ACLNN_SDK_ACLNN_ACLNN_BASE_H

#include "aclnn/acl_meta.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Start the operator library alone (aclInit does too); configPath may be NULL. */
ACL_FUNC_VISIBILITY aclnnStatus aclnnInit(const char *configPath);
ACL_FUNC_VISIBILITY aclnnStatus aclnnFinalize(void);

#ifdef __cplusplus
}
#endif

#endif /* ACLNN_SDK_ACLNN_ACLNN_BASE_H */
