"""The precision standard of SPEC §10, as the CANN operator test kit applies it, and the
metrics of the Ascend ecosystem's accuracy tools beside it.

An element is ok if |actual - golden| <= atol + rtol * |golden|. An output passes if at
least 99 % of its elements are ok, no element's error exceeds both the hard limit and
32 ULP of the output dtype at |golden|, and every NaN/Inf matches (NaN with NaN, Inf with
Inf of the same sign).

The ecosystem's metrics (msprobe's compare, the PyTorch accuracy comparison on Ascend):
NaN/Inf matched in place count as equal zeros, and any unmatched one makes the metrics
N/A (None) and the accuracy not reached. The relative error is |actual - golden| /
max(|golden|, small value of the dtype) - the "small value" floor of the ecosystem's
precision standards (float32 1e-6, float16 and bfloat16 1e-3) - so a near-zero golden
does not turn a tiny absolute error into 5e+08. Cosine similarity is 1 when both outputs
are zero, N/A when one is (or for a single element). The accuracy is reached unless
cosine < 0.99 with max abs error > 0.001, cosine < 0.9, or max abs error > 1.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import ml_dtypes
import numpy as np

PASS_FRACTION = 0.99
HARD_ULPS = 32
SMALL_VALUES = {np.dtype(np.float16): 1e-3, np.dtype(ml_dtypes.bfloat16): 1e-3,
                np.dtype(np.float32): 1e-6}
RATIO_THRESHOLDS = (0.001, 0.005)  # the one-thousandth and five-thousandths error ratios
ZERO_NORM = float(np.finfo(np.float64).eps)  # a norm this small is an all-zero output


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
    """How one output compares with its golden: our standard's verdict (`passed`, the
    pass criterion) and the ecosystem's metrics; max_rel_error is the ecosystem's."""

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
    cosine_similarity: float | None  # the ecosystem's metrics (see the module docstring)
    one_thousandth_ratio: float | None
    five_thousandths_ratio: float | None
    accuracy_reached: bool

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


class Tally:
    """The verdict on an output of `dtype` and `shape`, gathered a contiguous run of its
    flattened (C-order) elements at a time, the runs in any order: verdict() equals
    compare() on the whole output, field for field."""

    def __init__(self, dtype, shape) -> None:
        self.standard = standard_for(dtype)
        self.small_value = SMALL_VALUES[np.dtype(dtype)]
        self._products = np.zeros(3)  # sums of actual * golden, actual**2, golden**2
        self._within = np.zeros(len(RATIO_THRESHOLDS), np.int64)
        self.shape = tuple(int(d) for d in shape)
        self.elements = math.prod(self.shape)
        self._added = 0
        self._ok = 0  # elements within tolerance, and NaN/Inf matched
        self._hard = 0
        self._mismatched = 0
        self._finite = False
        self._max_relative = 0.0
        # (key, flat index, actual, golden): the least key, then the least index, wins
        self._worst = (math.inf, self.elements, math.nan, math.nan)  # key: -error
        self._first_mismatch = self._worst  # key: 0

    def add(self, actual, golden, start: int) -> None:
        """Judge `actual` against the float64 `golden` (as many elements): the output's
        flattened elements from `start` on."""
        a = np.asarray(actual).astype(np.float64).ravel()
        g = np.asarray(golden, dtype=np.float64).ravel()
        if a.shape != g.shape:
            raise ValueError(f"actual has {a.size} elements, golden {g.size}")
        if not 0 <= start <= self.elements - a.size:
            raise ValueError(f"elements {start} to {start + a.size} are not all within the "
                             f"output's {self.elements}")
        self._added += a.size
        if a.size:
            self._judge(a, g, int(start))

    def _judge(self, a: np.ndarray, g: np.ndarray, start: int) -> None:
        special = ~np.isfinite(a) | ~np.isfinite(g)
        matched = (np.isnan(a) & np.isnan(g)) | (np.isinf(a) & (a == g))
        mismatched = special & ~matched
        finite = ~special
        with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
            error = np.where(finite, np.abs(a - g), 0.0)
            relative = np.where(finite, error / np.maximum(np.abs(g), self.small_value), 0.0)
            a0, g0 = np.where(finite, a, 0.0), np.where(finite, g, 0.0)
            self._products += (np.dot(a0, g0), np.dot(a0, a0), np.dot(g0, g0))
        self._within += [np.count_nonzero(finite & (relative < t)) + np.count_nonzero(matched)
                         for t in RATIO_THRESHOLDS]
        limits = self.standard.atol + self.standard.rtol * np.abs(g)
        hard = (finite & (error > self.standard.limit)
                & (error > HARD_ULPS * ulp(np.abs(g), self.standard)))
        self._ok += int(np.count_nonzero(finite & (error <= limits)))
        self._ok += int(np.count_nonzero(matched))
        self._hard += int(np.count_nonzero(hard))
        self._mismatched += int(np.count_nonzero(mismatched))
        self._finite = self._finite or bool(finite.any())
        self._max_relative = max(self._max_relative, float(relative.max()))
        self._track_worst(a, g, start, error, mismatched)

    def _track_worst(self, a, g, start: int, error: np.ndarray, mismatched: np.ndarray) -> None:
        """Keep the run's first greatest error (if greater than the one kept, or as great
        and earlier) and its first NaN/Inf mismatch (if earlier than the one kept)."""
        i = int(np.argmax(error))
        self._worst = min(self._worst, (-float(error[i]), start + i, float(a[i]), float(g[i])))
        if mismatched.any():
            i = int(np.argmax(mismatched))
            self._first_mismatch = min(self._first_mismatch,
                                       (0.0, start + i, float(a[i]), float(g[i])))

    def verdict(self) -> Verdict:
        """The verdict on the whole output; every element must have been added once. The
        worst element is the first of the greatest error (NaN/Inf counting 0), or with no
        finite element, the first NaN/Inf mismatch."""
        if self._added != self.elements:
            raise ValueError(f"{self._added} elements added to a tally of {self.elements}")
        if not self.elements:
            return Verdict(True, 0, 1.0, 0.0, 0.0, 0, 0, None, None, None, "empty output",
                           None, None, None, True)
        ok_fraction = self._ok / self.elements
        reasons = []
        if self._mismatched:
            reasons.append(f"{self._mismatched} NaN/Inf mismatches")
        if self._hard:
            reasons.append(f"{self._hard} elements past the hard limit and {HARD_ULPS} ULP")
        if ok_fraction < PASS_FRACTION:
            reasons.append(f"only {ok_fraction:.2%} of elements within tolerance")
        use_mismatch = self._mismatched > 0 and not self._finite
        _, worst, actual, golden = self._first_mismatch if use_mismatch else self._worst
        index = [int(i) for i in np.unravel_index(worst, self.shape)] if self.shape else []
        max_abs = -self._worst[0]
        cosine, ratios = self._cosine(), [None] * len(RATIO_THRESHOLDS)
        if not self._mismatched:
            ratios = [int(count) / self.elements for count in self._within]
        return Verdict(not reasons, self.elements, ok_fraction, max_abs, self._max_relative,
                       self._hard, self._mismatched, index, actual, golden,
                       "; ".join(reasons) or "pass", cosine, *ratios,
                       self._reached(cosine, max_abs))

    def _cosine(self) -> float | None:
        """The outputs' cosine similarity (None where the ecosystem's tools show N/A)."""
        if self._mismatched or self.elements < 2:
            return None
        dot, norm_a, norm_g = self._products[0], *np.sqrt(self._products[1:])
        if norm_a <= ZERO_NORM and norm_g <= ZERO_NORM:
            return 1.0
        if norm_a <= ZERO_NORM or norm_g <= ZERO_NORM:
            return None
        return float(dot / (norm_a * norm_g))

    def _reached(self, cosine: float | None, max_abs: float) -> bool:
        """The accuracy comparison's verdict; without a cosine, by max abs error alone."""
        if self._mismatched:
            return False
        if cosine is None:
            return max_abs <= 0.001
        return not ((cosine < 0.99 and max_abs > 0.001) or cosine < 0.9 or max_abs > 1)


def compare(actual, golden, dtype=None) -> Verdict:
    """Apply the standard of `dtype` (default: actual's dtype) to `actual` against the
    float64 `golden` (as many elements)."""
    actual = np.asarray(actual)
    tally = Tally(actual.dtype if dtype is None else dtype, actual.shape)
    tally.add(actual, golden, 0)
    return tally.verdict()
