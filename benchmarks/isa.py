"""The instruction-set levels a benchmark run covers: every level this machine can run.

An AVX-512 machine runs its native build and an AVX2 build (Numba compiled for Haswell,
PyTorch's dispatch pinned with ATEN_CPU_CAPABILITY=avx2), each in its own process; an AVX2
machine runs its native build; other machines (AArch64) their native one.
"""

from __future__ import annotations

import platform
from pathlib import Path

# Numba target of the AVX2 level: Haswell's features, listed so that none of the host's
# wider ones (AVX-512) is added
_HASWELL_FEATURES = ("+64bit,+avx,+avx2,+bmi,+bmi2,+cmov,+cx16,+cx8,+f16c,+fma,+fxsr,+lzcnt,"
                     "+mmx,+movbe,+popcnt,+sse,+sse2,+sse3,+sse4.1,+sse4.2,+ssse3,+xsave")
ENVIRONMENTS = {
    "avx2": {"NUMBA_CPU_NAME": "haswell", "NUMBA_CPU_FEATURES": _HASWELL_FEATURES,
             "ATEN_CPU_CAPABILITY": "avx2"},
}
AVX512_FLAGS = {"avx512f", "avx512bw", "avx512vl", "avx512dq"}
AVX2_FLAGS = {"avx2", "fma", "f16c"}


def _flags() -> set[str]:
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return set()
    line = next((ln for ln in text.splitlines() if ln.startswith(("flags", "Features"))), "")
    return set(line.partition(":")[2].split())


def native_level() -> str:
    """The name of this machine's own level: avx512, avx2, neon or baseline."""
    if platform.machine().lower() in ("aarch64", "arm64"):
        return "neon"
    flags = _flags()
    if AVX512_FLAGS <= flags:
        return "avx512"
    return "avx2" if AVX2_FLAGS <= flags else "baseline"


def levels() -> list[str]:
    """Every level to run here, the native one first."""
    native = native_level()
    return [native, "avx2"] if native == "avx512" else [native]
