/*
 * aclnnop/aclnn_util.h - the export mark of operator functions.
 */
#ifndef ACLNN_SDK_ACLNNOP_ACLNN_UTIL_H
#define ACLNN_SDK_ACLNNOP_ACLNN_UTIL_H

#define ACLNN_API __attribute__((visibility("default")))

#endif /* ACLNN_SDK_ACLNNOP_ACLNN_UTIL_H */
