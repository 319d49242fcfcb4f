# aclnn SDK environment, CANN-toolkit style: source this file (or, with the aclnn command,
# eval "$(aclnn sdk --env)") before building with CMake or pkg-config.
export ASCEND_HOME_PATH="@PREFIX@"
export ASCEND_TOOLKIT_HOME="@PREFIX@"
export ASCEND_CUSTOM_PATH="@PREFIX@"
export ASCEND_OPP_PATH="@PREFIX@"
export LD_LIBRARY_PATH="@PREFIX@/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export PKG_CONFIG_PATH="@PREFIX@/lib64/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
export CMAKE_PREFIX_PATH="@PREFIX@/lib64/cmake${CMAKE_PREFIX_PATH:+:$CMAKE_PREFIX_PATH}"
