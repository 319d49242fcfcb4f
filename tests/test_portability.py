"""The kernels on CPUs without this machine's features: float16 conversions without F16C
(integer arithmetic, bit for bit what F16C gives), and one whole build with no CPU
features to lean on (SSE2-only x86-64), run in a subprocess and compared with this
process's results, its every kernel's LLVM IR cross-compiled for AArch64."""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
import textwrap

import llvmlite.binding as llvm
import numba
import numpy as np
import pytest

from aclnn.kernels import bits
from support import mapped

BASELINE = {"NUMBA_CPU_NAME": "x86-64",
            "NUMBA_CPU_FEATURES": "+64bit,+cmov,+cx8,+fxsr,+mmx,+sse,+sse2"}


def _converters():
    """Fresh (uncached) compiled loops through half_to_f32 / f32_to_half, generated with the
    current value of bits.F16C."""
    return mapped(bits.half_to_f32), mapped(bits.f32_to_half, np.uint16)


def _float32_sample() -> np.ndarray:
    """Every float32 sign/exponent/top-7-mantissa-bit pattern with low bits at and around
    the float16 rounding points (ties, half-ulps, all ones), plus random patterns."""
    high = np.arange(1 << 16, dtype=np.uint32) << 16
    low = np.array([0, 1, 0x0FFF, 0x1000, 0x1001, 0x1FFF, 0x2000, 0x2001, 0xFFFF, 0x8000,
                    0x7FFF, 0xF000], np.uint32)
    patterns = (high[:, None] | low[None, :]).reshape(-1)
    random = np.random.default_rng(3).integers(0, 1 << 32, 2_000_000, dtype=np.uint32)
    return np.concatenate([patterns, random]).view(np.float32)


@pytest.mark.skipif(not bits.F16C, reason="needs F16C to compare the integer path with")
def test_integer_half_conversions_equal_f16c(monkeypatch):
    """All 65536 float16 values widened, and ~2.8M float32 patterns narrowed: the integer
    arithmetic gives F16C's bits exactly (NaNs quiet, payload kept, RNE, overflow to inf)."""
    native_widen, native_narrow = _converters()
    monkeypatch.setattr(bits, "F16C", False)
    integer_widen, integer_narrow = _converters()
    halves = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16)
    assert np.array_equal(integer_widen(halves).view(np.uint32),
                          native_widen(halves).view(np.uint32))
    x = _float32_sample()
    assert np.array_equal(integer_narrow(x), native_narrow(x))


_CALLS = textwrap.dedent("""
    import json, sys
    import ml_dtypes, numpy as np
    import aclnn
    from aclnn.kernels import bits
    rng = np.random.default_rng(0)
    results = {"f16c": bits.F16C, "fma": "+fma" in bits.target_features()}
    for name, dt in (("f32", np.float32), ("f16", np.float16), ("bf16", ml_dtypes.bfloat16)):
        g, x, y = (rng.standard_normal((48, 37)).astype(dt) for _ in range(3))
        x[0, :4] = [np.nan, np.inf, -np.inf, 0]
        calls = {
            "smooth_l1": aclnn.smooth_l1_loss_backward(g, x.T.copy().T, y, "mean", 0.5),
            "l1": aclnn.l1_loss_backward(g, x, y[:1], "sum"),
            "gelu": aclnn.gelu_backward(g, x, "none"),
            "gelu_tanh": aclnn.gelu_backward(g[:, ::2], x[:, ::2], "tanh"),
            "avgpool": aclnn.avg_pool2d_backward(
                rng.standard_normal((1, 4, 12, 12)).astype(dt), np.zeros((1, 4, 24, 24), dt),
                2, cube_math_type=0),
        }
        for op, value in calls.items():
            results[f"{name}/{op}"] = np.asarray(value, np.float64).tolist()
""")
_WRITE_CALLS = _CALLS + "json.dump(results, open(sys.argv[1], 'w'))\n"
AARCH64 = "aarch64-unknown-linux-gnu"


def _portable_build(tmp_path) -> tuple[dict, list[str]]:
    """The results of _CALLS and the LLVM IR of every module compiled for them, from a new
    process that builds every kernel with no CPU features to lean on: for SSE2-only x86-64
    on an x86-64 machine (BASELINE), for Numba's generic CPU elsewhere; x86's store fence
    left out (`bits._X86`), as it is on AArch64, so that one build serves the results and
    the cross-compilation (building every kernel takes minutes)."""
    env = {**os.environ, **(BASELINE if bits._X86 else {"NUMBA_CPU_NAME": "generic"}),
           "NUMBA_CACHE_DIR": str(tmp_path / "numba"), "NUMBA_DUMP_LLVM": "1"}
    code = "from aclnn.kernels import bits\nbits._X86 = False\n" + _WRITE_CALLS
    out = tmp_path / "results.json"
    done = subprocess.run([sys.executable, "-c", code, str(out)], capture_output=True,
                          text=True, env=env, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    modules = re.findall(r"-+LLVM DUMP [^\n]*-+\n(.*?)\n=+\n", done.stdout, re.S)
    return json.loads(out.read_text()), modules


def _calls_here() -> dict:
    """The results of _CALLS in this process (this machine's build, the kernels this
    process has compiled or loaded already)."""
    namespace = {}
    exec(_CALLS, namespace)
    return namespace["results"]


def _assert_same_results(baseline: dict, native: dict) -> None:
    """The SSE2-only build had neither F16C nor FMA, and each of its results equals this
    machine's within a float32 rounding (FMA contraction may differ)."""
    assert baseline.pop("f16c") is False and baseline.pop("fma") is False
    native.pop("f16c"), native.pop("fma")
    assert baseline.keys() == native.keys()
    for key in native:
        got, want = np.array(baseline[key], np.float64), np.array(native[key], np.float64)
        tolerance = 2.0**-21 if key.startswith("f32") else 2.0**-7
        np.testing.assert_allclose(got, want, rtol=tolerance, atol=1e-30, err_msg=key)


def _assert_compiles_for_aarch64(modules: list[str]) -> None:
    """Every module, retargeted, compiles to AArch64 code with NEON: no x86 intrinsic in
    any, and the GELU rows (flat and tiled kernel) become NEON vector arithmetic
    (fmla/fdiv on .4s)."""
    assert len(modules) > 20
    llvm.initialize_all_targets()
    llvm.initialize_all_asmprinters()
    machine = llvm.Target.from_triple(AARCH64).create_target_machine(features="+neon")
    neon_rows = 0
    for text in modules:
        assert "@llvm.x86." not in text
        text = re.sub(r'target triple = ".*"', f'target triple = "{AARCH64}"', text)
        text = re.sub(r'target datalayout = ".*"',
                      f'target datalayout = "{machine.target_data}"', text)
        module = llvm.parse_assembly(text)
        module.verify()
        assembly = machine.emit_assembly(module)
        neon_rows += bool(re.search(r"fdiv\s+v\d+\.4s", assembly)
                          and re.search(r"fmla\s+v\d+\.4s", assembly))
    assert neon_rows >= 2


@pytest.mark.slow(compiles_here=True)
def test_a_featureless_build_runs_alike_and_compiles_for_aarch64(tmp_path):
    """Every kernel built with no CPU features to lean on (`_portable_build`): on an x86-64
    machine, built for SSE2-only x86-64 (no AVX, FMA or F16C), it runs and gives this
    machine's results within a float32 rounding; its LLVM IR, every module of it,
    compiles for AArch64, where the GELU rows become NEON code."""
    results, modules = _portable_build(tmp_path)
    if bits._X86:
        _assert_same_results(results, _calls_here())
    _assert_compiles_for_aarch64(modules)


def test_the_store_fence_is_x86_only(monkeypatch):
    """`bits.store_fence` asks for x86's `sfence` only where `bits._X86` says the build is
    for x86 (the featureless build above leaves it out to serve AArch64 as well); both
    forms keep the seq_cst fence."""
    irs = {}
    for x86 in (True, False):
        monkeypatch.setattr(bits, "_X86", x86)

        @numba.njit(no_cpython_wrapper=True)
        def fenced():
            bits.store_fence()

        fenced.compile(())
        irs[x86] = fenced.inspect_llvm(())
    assert "llvm.x86.sse.sfence" in irs[True] and "llvm.x86." not in irs[False]
    assert all("fence seq_cst" in ir for ir in irs.values())


def test_cpu_vendor_from_cpuinfo_or_the_platform(monkeypatch):
    """`bits.cpu_vendor` reads /proc/cpuinfo's vendor_id; where the file cannot be read, the
    platform's processor string names it, or nothing does (""); the file is read once per
    process (the kernels' modules ask at import)."""
    read = bits.cpu_vendor.__wrapped__  # the uncached function
    cpuinfo = "processor\t: 0\nvendor_id\t: AuthenticAMD\ncpu family\t: 25\n"
    monkeypatch.setattr(bits, "open", lambda *a, **k: io.StringIO(cpuinfo), raising=False)
    assert read() == "AuthenticAMD"

    def unreadable(*args, **kwargs):
        raise OSError("no /proc here")

    monkeypatch.setattr(bits, "open", unreadable, raising=False)
    monkeypatch.setattr(bits.platform, "processor",
                        lambda: "Intel64 Family 6 Model 167 Stepping 1, GenuineIntel")
    assert read() == "GenuineIntel"
    monkeypatch.setattr(bits.platform, "processor", lambda: "arm")
    assert read() == ""
    bits.cpu_vendor()
    assert bits.cpu_vendor.cache_info().currsize == 1
