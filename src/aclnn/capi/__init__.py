"""The C API: CANN's C headers and shared libraries over the same Python objects.

`sdk` builds the SDK (headers, `libaclnn.so` under every library name real build
scripts link, set_env.sh, pkg-config and CMake files); `bridge` is the Python side of
every exported function; `handles` gives C callers opaque handles of Python objects.
"""
