"""The precision standard of SPEC §10, as the CANN operator test kit applies it.

An element is ok if |actual - golden| <= atol + rtol * |golden|. An output passes if at
least 99 % of its elements are ok, no element's error exceeds both the hard limit and
32 ULP of the output dtype at |golden|, and every NaN/Inf matches (NaN with NaN, Inf with
Inf of the same sign).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import ml_dtypes
import numpy as np

PASS_FRACTION = 0.99
HARD_ULPS = 32


@dataclass(frozen=True)
class Standard:
    """(rtol, atol, hard limit) of one output dtype, and its float format (explicit
    mantissa bits, smallest normal exponent) for ULP sizes."""

    rtol: float
    atol: float
    limit: float
    mantissa_bits: int
    min_exponent: int


STANDARDS = {
    np.dtype(np.float16): Standard(2.0**-9, 2.0**-9, 0.1, 10, -14),
    np.dtype(ml_dtypes.bfloat16): Standard(2.0**-6, 2.0**-6, 1.0, 7, -126),
    np.dtype(np.float32): Standard(2.0**-10, 2.0**-16, 0.01, 23, -126),
}


@dataclass(frozen=True)
class Verdict:
    """How one output compares with its golden."""

    passed: bool
    elements: int
    ok_fraction: float
    max_abs_error: float
    max_rel_error: float
    hard_failures: int
    special_mismatches: int
    worst_index: list[int] | None
    worst_actual: float | None
    worst_golden: float | None
    reason: str

    def to_json(self) -> dict:
        """The verdict as JSON-ready values (no NaN: JSON has none)."""
        return {k: (None if isinstance(v, float) and not np.isfinite(v) else v)
                for k, v in asdict(self).items()}


def standard_for(dtype) -> Standard:
    """The standard of an output dtype (float16, bfloat16 or float32)."""
    try:
        return STANDARDS[np.dtype(dtype)]
    except KeyError:
        raise ValueError(f"no precision standard for dtype {np.dtype(dtype)}; "
                         "float16, bfloat16 and float32 have one") from None


def ulp(magnitude: np.ndarray, standard: Standard) -> np.ndarray:
    """The spacing of the output format at |golden| (subnormal spacing below the normals)."""
    _, exponent = np.frexp(magnitude)  # magnitude = m * 2**exponent, m in [0.5, 1)
    exponent = np.where(magnitude == 0, standard.min_exponent,
                        np.maximum(exponent - 1, standard.min_exponent))
    return np.ldexp(1.0, exponent - standard.mantissa_bits)


def compare(actual, golden, dtype=None) -> Verdict:
    """Apply the standard of `dtype` (default: actual's dtype) to `actual` against the
    float64 `golden` (same shape)."""
    actual = np.asarray(actual)
    standard = standard_for(actual.dtype if dtype is None else dtype)
    a = actual.astype(np.float64).ravel()
    g = np.asarray(golden, dtype=np.float64).ravel()
    if a.shape != g.shape:
        raise ValueError(f"actual has {a.size} elements, golden {g.size}")
    if a.size == 0:
        return Verdict(True, 0, 1.0, 0.0, 0.0, 0, 0, None, None, None, "empty output")
    special = ~np.isfinite(a) | ~np.isfinite(g)
    matched = (np.isnan(a) & np.isnan(g)) | (np.isinf(a) & (a == g))
    mismatched = special & ~matched
    finite = ~special
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        error = np.where(finite, np.abs(a - g), 0.0)
        relative = np.where(finite & (g != 0), error / np.abs(g), 0.0)
    ok = finite & (error <= standard.atol + standard.rtol * np.abs(g))
    ok_fraction = float((ok.sum() + matched.sum()) / a.size)
    hard = finite & (error > standard.limit) & (error > HARD_ULPS * ulp(np.abs(g), standard))
    worst = int(np.argmax(error)) if finite.any() else int(np.argmax(mismatched))
    index = [int(i) for i in np.unravel_index(worst, actual.shape)] if actual.ndim else []
    reasons = []
    if mismatched.any():
        reasons.append(f"{int(mismatched.sum())} NaN/Inf mismatches")
    if hard.any():
        reasons.append(f"{int(hard.sum())} elements past the hard limit and {HARD_ULPS} ULP")
    if ok_fraction < PASS_FRACTION:
        reasons.append(f"only {ok_fraction:.2%} of elements within tolerance")
    return Verdict(not reasons, int(a.size), ok_fraction, float(error.max()),
                   float(relative.max()), int(hard.sum()), int(mismatched.sum()), index,
                   float(a[worst]), float(g[worst]), "; ".join(reasons) or "pass")
