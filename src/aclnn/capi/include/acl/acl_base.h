/*
 * acl/acl_base.h - AscendCL base types, enums and status codes.
 */
#ifndef ACLNN_SDK_ACL_ACL_BASE_H
#define ACLNN_SDK_ACL_ACL_BASE_H

#include "acl_base_rt.h"
#include "error_codes/rt_error_codes.h"

#endif /* ACLNN_SDK_ACL_ACL_BASE_H */
