"""Building and running C and C++ programs against the C SDK, for the C API tests.

The SDK is built once per session into a temporary prefix (conftest's `sdk_prefix`);
programs are compiled with
the compiler Python extensions use, under AddressSanitizer and UBSan where asked, and
run as a user would run them (their own process, the SDK found through the rpath).
"""

from __future__ import annotations

import functools
import os
import subprocess
import sys
from pathlib import Path

from aclnn.capi import sdk

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent
C_TESTS = TESTS / "c"
SAMPLES = ROOT / "examples" / "c"
SEEDS = ROOT.parent / "shared" / "seeds"
SANITIZE = ["-fsanitize=address,undefined", "-fno-omit-frame-pointer", "-fno-sanitize-recover=all"]
#: Python keeps memory until exit by design, so leak reports would be noise.
SANITIZER_ENV = {"ASAN_OPTIONS": "detect_leaks=0", "UBSAN_OPTIONS": "print_stacktrace=1"}
TIMEOUT = 300


def compile_program(prefix: Path, sources: list[Path], program: Path, *, cxx: bool = False,
                    sanitize: bool = True, strict: bool = True, link: bool = True,
                    extra: tuple[str, ...] = ()) -> Path:
    """Compile and link `sources` against the SDK at `prefix` (as `g++ ... $(aclnn sdk
    --cflags --libs)` does), warnings as errors if `strict`; the compiler's output is in
    the assertion if it fails. `link=False`: headers only (a host that dlopen()s)."""
    command = ["g++" if cxx else "gcc", "-std=c++11" if cxx else "-std=c11", "-D_DEFAULT_SOURCE",
               "-g", "-O1", *(["-Wall", "-Wextra", "-Werror"] if strict else ["-w"]),
               *(SANITIZE if sanitize else []),
               *map(str, sources), *sdk.cflags(prefix), *(sdk.libs(prefix) if link else []),
               "-pthread", "-lm",
               "-ldl", *extra, "-o", str(program)]
    done = subprocess.run(command, capture_output=True, text=True)
    assert done.returncode == 0, f"{' '.join(command)}\n{done.stderr}"
    return program


def run_program(command: list, env: dict | None = None, timeout: int = TIMEOUT,
                check: bool = True) -> subprocess.CompletedProcess:
    """Run a program with the sanitizer settings; by default it must exit 0."""
    full_env = {**os.environ, **SANITIZER_ENV, **(env or {})}
    done = subprocess.run([str(c) for c in command], capture_output=True, text=True,
                          env=full_env, timeout=timeout)
    if check:
        assert done.returncode == 0, (f"{command} exited {done.returncode}\n"
                                      f"stdout:\n{done.stdout}\nstderr:\n{done.stderr}")
    return done


@functools.cache
def python_sample(module: str) -> str:
    """What the Python sample `aclnn.samples.<module>` prints (run once per session)."""
    return run_program([sys.executable, "-m", f"aclnn.samples.{module}"]).stdout
