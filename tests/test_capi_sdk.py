"""The C SDK (SPEC §13): its layout, its headers (valid C11 and C++11, CANN's values),
its exports, `aclnn sdk`, and the errors when it cannot be built."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from aclnn import codes
from aclnn.acl import _codes as rt_codes
from aclnn.capi import sdk
from aclnn.dtypes import aclDataType, aclFormat
from aclnn.user import cli

HEADERS = sorted(p.relative_to(sdk.INCLUDE).as_posix() for p in sdk.INCLUDE.rglob("*.h"))
PAGE_INCLUDES = ["acl/acl.h", "aclnnop/aclnn_smooth_l1_loss_backward.h",
                 "aclnnop/aclnn_l1_loss_backward.h", "aclnnop/aclnn_gelu_backward_v2.h",
                 "aclnnop/aclnn_avgpool2d_backward.h", "aclnn/acl_meta.h", "aclnn/aclnn_base.h"]
STRICT = ["-Wall", "-Wextra", "-pedantic", "-Werror", "-fsyntax-only"]


def test_layout(sdk_prefix):
    for header in PAGE_INCLUDES:
        assert (sdk_prefix / "include" / header).is_file(), header
    lib64 = sdk_prefix / "lib64"
    for name in sdk.LINK_NAMES:
        assert (lib64 / name).is_symlink() and (lib64 / name).resolve() == lib64 / sdk.LIBRARY
    dynamic = subprocess.run(["readelf", "-d", str(lib64 / sdk.LIBRARY)], capture_output=True,
                             text=True, check=True).stdout
    assert "Library soname: [libaclnn.so]" in dynamic
    env = (sdk_prefix / "set_env.sh").read_text()
    for variable in ("ASCEND_HOME_PATH", "ASCEND_CUSTOM_PATH", "LD_LIBRARY_PATH",
                     "PKG_CONFIG_PATH", "CMAKE_PREFIX_PATH"):
        assert re.search(rf'^export {variable}="{re.escape(str(sdk_prefix))}', env, re.M), variable
    pc = (lib64 / "pkgconfig" / "aclnn.pc").read_text()
    assert f"prefix={sdk_prefix}\n" in pc and "-lascendcl" in pc
    assert (lib64 / "cmake" / "aclnn" / "aclnnConfig.cmake").is_file()


def _declared_functions() -> set[str]:
    names = set()
    for header in HEADERS:
        text = (sdk.INCLUDE / header).read_text()
        names |= set(re.findall(r"^(?:ACL_FUNC_VISIBILITY|ACLNN_API)\s[^;(]*?\b(\w+)\s*\(", text,
                                re.M))
    return names


def test_exports_are_the_declared_functions(sdk_prefix):
    library = sdk_prefix / "lib64" / sdk.LIBRARY
    symbols = subprocess.run(["nm", "-D", "--defined-only", str(library)], capture_output=True,
                             text=True, check=True).stdout
    exported = {line.split()[-1] for line in symbols.splitlines() if " T " in line}
    declared = _declared_functions()
    assert len(declared) >= 40
    assert exported == declared | {f"PyInit_{sdk.MODULE}"}


@pytest.mark.parametrize("language", ["c11", "c++11"])
def test_every_header_compiles_alone(language, tmp_path):
    compiler = "gcc" if language == "c11" else "g++"
    for header in HEADERS:
        unit = tmp_path / ("unit.c" if language == "c11" else "unit.cpp")
        unit.write_text(f'#include "{header}"\n#include "{header}"\n'
                        "int main(void) { return 0; }\n")
        done = subprocess.run([compiler, f"-std={language}", *STRICT, f"-I{sdk.INCLUDE}",
                               str(unit)], capture_output=True, text=True)
        assert done.returncode == 0, f"{header} as {language}:\n{done.stderr}"


def test_cxx_uses_of_the_pages_compile(tmp_path):
    """The pages write aclDataType::ACL_FLOAT and compare aclnnStatus with ACL_SUCCESS."""
    unit = tmp_path / "uses.cpp"
    unit.write_text("""
#include "acl/acl.h"
#include "aclnnop/aclnn_gelu_backward_v2.h"
int main() {
    aclDataType dtype = aclDataType::ACL_FLOAT;
    aclFormat format = aclFormat::ACL_FORMAT_NCHW;
    aclnnStatus status = OK;
    aclError error = ACL_SUCCESS;
    return (status == ACL_SUCCESS && error == ACL_SUCCESS && dtype == ACL_FLOAT
            && format == ACL_FORMAT_NCHW) ? 0 : 1;
}
""")
    done = subprocess.run(["g++", "-std=c++11", *STRICT, f"-I{sdk.INCLUDE}", str(unit)],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def _header_constants() -> dict[str, int]:
    constants = {}
    for header in HEADERS:
        text = (sdk.INCLUDE / header).read_text()
        for name, value in re.findall(r"\b(ACL\w*)\s*=\s*(-?\w+)\s*[,;\n]", text):
            constants[name] = int(value, 0)
        for name, value in re.findall(r"#define\s+(ACL\w*)\s+(-?\d+)", text):
            constants[name] = int(value)
    return constants


def test_header_values_are_the_python_api_values():
    constants = _header_constants()
    for member in aclDataType:
        assert constants[member.name] == member.value, member.name
    for member in aclFormat:
        c_name = "ACL_FRACTAL_Z_3D" if member.name == "ACL_FORMAT_FRACTAL_Z_3D" else member.name
        assert constants[c_name] == member.value, member.name
    for name in ("ACLNN_SUCCESS", "ACLNN_ERR_PARAM_NULLPTR", "ACLNN_ERR_PARAM_INVALID",
                 "ACLNN_ERR_RUNTIME_ERROR", "ACLNN_ERR_INNER", "ACLNN_ERR_INNER_NULLPTR"):
        assert constants[name] == getattr(codes, name), name
    for name in ("ACL_SUCCESS", "ACL_ERROR_INVALID_PARAM", "ACL_ERROR_REPEAT_INITIALIZE",
                 "ACL_ERROR_REPEAT_FINALIZE", "ACL_ERROR_RT_PARAM_INVALID",
                 "ACL_ERROR_RT_INVALID_DEVICEID", "ACL_ERROR_RT_MEMORY_ALLOCATION",
                 "ACL_ERROR_RT_INTERNAL_ERROR"):
        assert constants[name] == getattr(rt_codes, name), name


def test_enumerators_without_values_count_from_zero(tmp_path):
    """aclrtMemcpyKind and aclrtMemMallocPolicy number their members implicitly."""
    unit = tmp_path / "kinds.c"
    unit.write_text('#include "acl/acl.h"\n#include <stdio.h>\nint main(void) {\n'
                    '  printf("%d %d %d %d %d %d %d\\n", ACL_MEMCPY_HOST_TO_HOST,\n'
                    '         ACL_MEMCPY_HOST_TO_DEVICE, ACL_MEMCPY_DEVICE_TO_HOST,\n'
                    '         ACL_MEMCPY_DEVICE_TO_DEVICE, ACL_MEM_MALLOC_HUGE_FIRST,\n'
                    '         ACL_MEM_MALLOC_HUGE_ONLY, ACL_MEM_MALLOC_NORMAL_ONLY);\n'
                    '  return 0;\n}\n')
    subprocess.run(["gcc", "-std=c11", f"-I{sdk.INCLUDE}", str(unit), "-o", str(tmp_path / "k")],
                   check=True)
    printed = subprocess.run([str(tmp_path / "k")], capture_output=True, text=True).stdout
    assert printed.split() == [str(v) for v in (
        rt_codes.ACL_MEMCPY_HOST_TO_HOST, rt_codes.ACL_MEMCPY_HOST_TO_DEVICE,
        rt_codes.ACL_MEMCPY_DEVICE_TO_HOST, rt_codes.ACL_MEMCPY_DEVICE_TO_DEVICE,
        *rt_codes.MALLOC_POLICIES)]


def test_ensure_builds_once_and_rebuilds_when_stale(sdk_prefix):
    library = sdk_prefix / "lib64" / sdk.LIBRARY
    built = library.stat().st_mtime_ns
    assert sdk.ensure(sdk_prefix) == sdk_prefix
    assert library.stat().st_mtime_ns == built
    (sdk_prefix / sdk.STAMP).write_text("stale")
    assert sdk.ensure(sdk_prefix) == sdk_prefix
    assert (sdk_prefix / sdk.STAMP).read_text() == sdk.stamp()
    assert (sdk_prefix / "lib64" / sdk.LIBRARY).stat().st_mtime_ns != built
    assert not list(sdk_prefix.parent.glob(f".{sdk_prefix.name}-*"))  # no staging left


def test_cli_prints_flags_prefix_and_environment(sdk_prefix, monkeypatch, capsys):
    monkeypatch.setenv(sdk.PREFIX_ENV, str(sdk_prefix))
    assert cli.main(["sdk", "--cflags", "--libs"]) == 0
    flags = capsys.readouterr().out.split()
    assert flags == [*sdk.cflags(sdk_prefix), *sdk.libs(sdk_prefix)]
    assert f"-I{sdk_prefix}/include" in flags and f"-Wl,-rpath,{sdk_prefix}/lib64" in flags
    assert {"-lascendcl", "-lnnopbase", "-lopapi"} <= set(flags)
    assert cli.main(["sdk"]) == 0
    assert capsys.readouterr().out == f"{sdk_prefix}\n"
    assert cli.main(["sdk", "--env"]) == 0
    env = capsys.readouterr().out
    assert f'export ASCEND_HOME_PATH="{sdk_prefix}"' in env
    done = subprocess.run(["bash", "-c", f'eval "$({sys.executable} -m aclnn sdk --env)"; '
                           'echo "$ASCEND_CUSTOM_PATH|$CMAKE_PREFIX_PATH"'],
                          capture_output=True, text=True, env={"PATH": "/usr/bin:/bin",
                                                               sdk.PREFIX_ENV: str(sdk_prefix)})
    assert done.stdout.strip() == f"{sdk_prefix}|{sdk_prefix}/lib64/cmake", done.stderr


def test_no_compiler_is_a_clear_error(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv(sdk.PREFIX_ENV, str(tmp_path / "sdk"))
    monkeypatch.setenv("CC", "/nonexistent/cc")
    assert cli.main(["sdk", "--cflags"]) == 2
    err = capsys.readouterr().err
    assert "aclnn sdk: no C compiler: '/nonexistent/cc' (from $CC) is not installed" in err
    assert not (tmp_path / "sdk").exists() and not list(tmp_path.glob(".sdk-*"))


def test_no_shared_libpython_is_a_clear_error(monkeypatch):
    real = sdk.sysconfig.get_config_var
    monkeypatch.setattr(sdk.sysconfig, "get_config_var",
                        lambda name: 0 if name == "Py_ENABLE_SHARED" else real(name))
    with pytest.raises(sdk.SdkError, match="has no shared libpython.*--enable-shared"):
        sdk.libpython()


def test_failed_compile_is_a_clear_error(tmp_path, monkeypatch, capsys):
    """A compiler that fails: SdkError, exit status 2, the old SDK untouched."""
    fake = tmp_path / "cc"
    fake.write_text("#!/bin/sh\necho 'cc: simulated failure' >&2\nexit 1\n")
    fake.chmod(0o755)
    monkeypatch.setenv(sdk.PREFIX_ENV, str(tmp_path / "sdk"))
    monkeypatch.setenv("CC", str(fake))
    assert cli.main(["sdk"]) == 2
    assert "aclnn sdk: compiling the C API library failed" in capsys.readouterr().err
    assert not (tmp_path / "sdk").exists()
