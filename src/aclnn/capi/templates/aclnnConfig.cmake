# find_package(aclnn): the aclnn SDK as the imported target aclnn::aclnn, and the
# variables aclnn_INCLUDE_DIRS and aclnn_LIBRARIES.
set(aclnn_PREFIX "@PREFIX@")
set(aclnn_VERSION "@VERSION@")
set(aclnn_INCLUDE_DIRS "${aclnn_PREFIX}/include" "${aclnn_PREFIX}/include/aclnnop"
    "${aclnn_PREFIX}/include/aclnn")
set(aclnn_LIBRARIES "${aclnn_PREFIX}/lib64/libaclnn.so")
if(NOT TARGET aclnn::aclnn)
  add_library(aclnn::aclnn SHARED IMPORTED)
  set_target_properties(aclnn::aclnn PROPERTIES
    IMPORTED_LOCATION "${aclnn_PREFIX}/lib64/libaclnn.so"
    IMPORTED_SONAME "libaclnn.so"
    INTERFACE_INCLUDE_DIRECTORIES "${aclnn_INCLUDE_DIRS}")
endif()
set(aclnn_FOUND TRUE)
