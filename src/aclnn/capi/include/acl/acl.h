/*
 * acl/acl.h - the AscendCL entry header: the runtime API an aclnn program uses.
 *
 * Part of aclnn (CANN's aclnn operators on any machine). Names, values and prototypes
 * are CANN's; the implementation is the aclnn Python package. Valid C11 and C++11.
 */
#ifndef ACLNN_SDK_ACL_ACL_H
#define ACLNN_SDK_ACL_ACL_H

#include "acl_rt.h"

#endif /* ACLNN_SDK_ACL_ACL_H */
