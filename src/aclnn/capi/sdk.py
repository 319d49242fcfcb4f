"""The C SDK: headers and one shared library in a CANN-toolkit-like prefix.

    <prefix>/include/{acl,aclnn,aclnnop}/...   the headers (this package's include/)
    <prefix>/lib64/libaclnn.so                 the library: cffi embedding mode, this
                                               interpreter and this aclnn package inside
    <prefix>/lib64/lib{ascendcl,acl_rt,nnopbase,opapi,opapi_nn,opapi_math,cust_opapi}.so
                                               the names real build scripts link (links)
    <prefix>/lib64/pkgconfig/aclnn.pc, <prefix>/lib64/cmake/aclnn/aclnnConfig*.cmake
    <prefix>/set_env.sh                        ASCEND_HOME_PATH and friends, CMAKE_PREFIX_PATH
                                               <prefix>/lib64/cmake (as CANN's does)

The prefix is $ACLNN_SDK_HOME, or share/aclnn-sdk under the interpreter's prefix (the
virtual environment). It is built on first use and rebuilt when anything it is made
from changes (sources, headers, this interpreter, the package's location); concurrent
builders wait for each other, and a build replaces the old SDK only once complete.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import sys
import sysconfig
import tempfile
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

HERE = Path(__file__).resolve().parent
INCLUDE, SOURCES, TEMPLATES = HERE / "include", HERE / "src", HERE / "templates"
LIBRARY = "libaclnn.so"
LINK_NAMES = ("libascendcl.so", "libacl_rt.so", "libnnopbase.so", "libopapi.so",
              "libopapi_nn.so", "libopapi_math.so", "libcust_opapi.so")
LINKED = ("ascendcl", "nnopbase", "opapi")  # what --libs links (all name the one library)
MODULE = "_aclnn_capi"
PREFIX_ENV = "ACLNN_SDK_HOME"
STAMP = ".aclnn-sdk-stamp"


class SdkError(Exception):
    """The SDK cannot be built here; the message says what is missing."""


def package_version() -> str:
    """The installed aclnn version (0.0.0 when run from a source tree)."""
    try:
        return version("aclnn")
    except PackageNotFoundError:
        return "0.0.0"


def default_prefix() -> Path:
    """$ACLNN_SDK_HOME, else <sys.prefix>/share/aclnn-sdk."""
    return Path(os.environ.get(PREFIX_ENV) or Path(sys.prefix) / "share" / "aclnn-sdk")


def libpython() -> Path:
    """The shared libpython this interpreter runs on; SdkError if it has none."""
    name = sysconfig.get_config_var("INSTSONAME") or ""
    path = Path(sysconfig.get_config_var("LIBDIR") or "") / name
    if not sysconfig.get_config_var("Py_ENABLE_SHARED") or ".so" not in name or not path.exists():
        raise SdkError(
            f"this Python ({sys.executable}) has no shared libpython (looked for "
            f"{path}), which the C API embeds; use a Python built with --enable-shared "
            "(most distributions' and pyenv's with PYTHON_CONFIGURE_OPTS=--enable-shared)")
    return path


def compiler() -> str:
    """The C compiler Python extensions build with ($CC or the interpreter's); SdkError if
    it is not installed."""
    command = os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc"
    program = command.split()[0]
    if shutil.which(program) is None:
        origin = "$CC" if os.environ.get("CC") else "Python's build configuration"
        raise SdkError(f"no C compiler: '{program}' (from {origin}) is not installed; install "
                       "gcc or clang, or point CC at one")
    return command


def _inputs() -> list[Path]:
    return sorted(p for root in (INCLUDE, SOURCES, TEMPLATES) for p in root.rglob("*")
                  if p.is_file()) + [Path(__file__).resolve()]


def stamp() -> str:
    """A digest of everything the SDK is made from."""
    digest = hashlib.sha256()
    for part in (sys.executable, sys.version, _package_root(), package_version()):
        digest.update(part.encode() + b"\0")
    for path in _inputs():
        digest.update(str(path.relative_to(HERE.parent)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def _package_root() -> str:
    """The directory holding this aclnn package, first on the embedded interpreter's path
    (so the library runs the aclnn that built it)."""
    return str(HERE.parent.parent)


def ensure(prefix: Path | None = None) -> Path:
    """The SDK's prefix, built first if it is missing or stale."""
    prefix = Path(prefix or default_prefix()).resolve()
    wanted = stamp()
    if _current(prefix, wanted):
        return prefix
    prefix.parent.mkdir(parents=True, exist_ok=True)
    with open(prefix.parent / f".{prefix.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not _current(prefix, wanted):
            _build(prefix, wanted)
    return prefix


def _current(prefix: Path, wanted: str) -> bool:
    try:
        return (prefix / STAMP).read_text() == wanted
    except OSError:
        return False


def _build(prefix: Path, wanted: str) -> None:
    print(f"aclnn sdk: building the C SDK in {prefix} (once per change of aclnn) ...",
          file=sys.stderr, flush=True)
    python = libpython()
    compiler()
    staging = Path(tempfile.mkdtemp(prefix=f".{prefix.name}-", dir=prefix.parent))
    staging.chmod(0o755)
    try:
        shutil.copytree(INCLUDE, staging / "include")
        lib64 = staging / "lib64"
        _compile(staging / "build", lib64 / LIBRARY, python)
        for name in LINK_NAMES:
            (lib64 / name).symlink_to(LIBRARY)
        _fill(TEMPLATES / "set_env.sh", staging / "set_env.sh", prefix)
        _fill(TEMPLATES / "aclnn.pc", lib64 / "pkgconfig" / "aclnn.pc", prefix)
        for name in ("aclnnConfig.cmake", "aclnnConfigVersion.cmake"):
            _fill(TEMPLATES / name, lib64 / "cmake" / "aclnn" / name, prefix)
        shutil.rmtree(staging / "build")
        (staging / STAMP).write_text(wanted)
        old = prefix.with_name(f".{prefix.name}-old-{os.getpid()}")
        if prefix.exists():
            prefix.rename(old)  # a running program keeps its mapped library
        staging.rename(prefix)
        shutil.rmtree(old, ignore_errors=True)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _fill(template: Path, target: Path, prefix: Path) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    text = template.read_text().replace("@PREFIX@", str(prefix))
    target.write_text(text.replace("@VERSION@", package_version()))


def _cdef() -> str:
    """bridge.h for cffi: its ACLNN_PY lines become the `extern "Python"` block."""
    lines = (SOURCES / "bridge.h").read_text().splitlines()
    shared = [line for line in lines if not line.startswith("ACLNN_PY ")]
    python = [line.removeprefix("ACLNN_PY ") for line in lines if line.startswith("ACLNN_PY ")]
    return "\n".join(shared) + '\nextern "Python" {\n' + "\n".join(python) + "\n}\n"


INIT_CODE = """\
import sys
if {root!r} not in sys.path:
    sys.path.insert(0, {root!r})
from {module} import ffi, lib
from aclnn.capi import bridge
bridge.attach(ffi, lib)
"""


def _compile(build: Path, target: Path, python: Path) -> None:
    import cffi  # a build-time need only: keep `aclnn sdk --cflags` and imports light

    ffi = cffi.FFI()
    ffi.embedding_api("")
    ffi.cdef(_cdef())
    ffi.embedding_init_code(INIT_CODE.format(root=_package_root(), module=MODULE))
    ffi.set_source(
        MODULE, '#include "shim.c"\n',
        include_dirs=[str(INCLUDE), str(SOURCES)],
        define_macros=[("FUNC_VISIBILITY", None), ("ACLNN_LIBPYTHON", f'"{python.name}"'),
                       ("ACLNN_PYTHON", f'"{sys.executable}"')],
        extra_compile_args=["-O2", "-fvisibility=hidden"],
        library_dirs=[str(python.parent)], runtime_library_dirs=[str(python.parent)],
        libraries=["dl", "pthread"], extra_link_args=[f"-Wl,-soname,{LIBRARY}"])
    build.mkdir(parents=True)
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        built = ffi.compile(tmpdir=str(build), target=LIBRARY, verbose=False)
    except Exception as exc:  # the compiler's own output is above, on stderr
        raise SdkError(f"compiling the C API library failed: {exc}") from None
    shutil.move(built, target)


def cflags(prefix: Path) -> list[str]:
    """Compiler flags: the include directories (both include styles the pages use)."""
    include = prefix / "include"
    return [f"-I{include}", f"-I{include / 'aclnnop'}", f"-I{include / 'aclnn'}"]


def libs(prefix: Path) -> list[str]:
    """Linker flags: the library directory, an rpath to it, and the libraries."""
    lib64 = prefix / "lib64"
    return [f"-L{lib64}", f"-Wl,-rpath,{lib64}", *(f"-l{name}" for name in LINKED)]


def environment(prefix: Path) -> str:
    """The `export` lines of set_env.sh, for `eval "$(aclnn sdk --env)"`."""
    return (prefix / "set_env.sh").read_text()
