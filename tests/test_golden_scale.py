"""What `aclnn run` needs at scale: the compiled erf of the GELU golden (the same values as
math.erf, fast), the precision verdict gathered chunk by chunk (aclnn.user.precision.Tally
equals compare on the whole), and case inputs drawn in chunks (the values and Generator
state of one whole draw)."""

from __future__ import annotations

import dataclasses
import math
import sys
import time
import tracemalloc

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aclnn.user import cases, golden
from aclnn.user.cases import TensorInput, draw_tensor
from aclnn.user.precision import (
    HARD_ULPS,
    PASS_FRACTION,
    SMALL_VALUES,
    STANDARDS,
    Tally,
    Verdict,
    compare,
)

BF16 = np.dtype(ml_dtypes.bfloat16)
FLOATS = [np.dtype(np.float16), BF16, np.dtype(np.float32)]


# --- erf --------------------------------------------------------------------------------

def _erf_arguments() -> np.ndarray:
    """Specials, tiny and huge values, powers of two, random normals of many scales and a
    dense grid over the range where erf changes."""
    rng = np.random.default_rng(11)
    big, tiny = sys.float_info.max, 5e-324
    specials = [math.nan, math.inf, -math.inf, 0.0, -0.0, tiny, -tiny, sys.float_info.min,
                1e-300, 1e-20, -1e-20, 0.5, -0.5, 5.9, 6.0, -6.0, 27.0, 1e300, -1e300, big,
                -big]
    powers = np.ldexp(1.0, np.arange(-1074, 1024, 7))
    normals = rng.normal(0, 1, 3000) * 10.0 ** rng.integers(-9, 3, 3000)
    grid = np.linspace(-8, 8, 3201)
    return np.concatenate([specials, powers, -powers, normals, grid])


def test_erf_is_bit_identical_to_math_erf():
    x = _erf_arguments()
    expected = np.array([math.erf(v) for v in x])
    assert golden.erf(x).tobytes() == expected.tobytes()


def test_gelu_golden_unchanged_by_the_compiled_erf():
    """The erf form's golden equals its formula with math.erf called per element."""
    x = _erf_arguments()
    grad = np.random.default_rng(3).normal(size=x.size)
    erf = np.array([math.erf(v) for v in x / math.sqrt(2)])
    with np.errstate(over="ignore", invalid="ignore"):
        derivative = 0.5 * (1 + erf) + x * np.exp(-0.5 * x * x) / math.sqrt(2 * math.pi)
        expected = grad * derivative
    assert golden.gelu_backward(grad, x, "none").tobytes() == expected.tobytes()


def _best_time(function, repeats: int = 5) -> float:
    best = math.inf
    for _ in range(repeats):
        start = time.perf_counter()
        function()
        best = min(best, time.perf_counter() - start)
    return best


def test_gelu_golden_is_fast():
    """A million elements in well under a second, erf compiled: at most half the time of a
    Python call per element. (np.exp is no yardstick: with AVX-512 NumPy's runs 16x as fast
    as the C library's erf, 0.56 against 9.1 ms, where a Python call per element took 34-48
    ms.)"""
    x = np.random.default_rng(4).normal(size=1_000_000)
    assert _best_time(lambda: golden.gelu_backward(x, x, "none"), 1) < 2.0
    sample = x[:100_000]
    per_call = _best_time(lambda: [math.erf(v) for v in sample], 3) * x.size / sample.size
    assert _best_time(lambda: golden.erf(x)) < 0.5 * per_call


# --- the chunked verdict ------------------------------------------------------------------

def _ulp(magnitude: float, dtype) -> float:
    standard = STANDARDS[np.dtype(dtype)]
    exponent = math.frexp(magnitude)[1] - 1 if magnitude else standard.min_exponent
    return math.ldexp(1.0, max(exponent, standard.min_exponent) - standard.mantissa_bits)


def _cosine(products: list[tuple[float, float]], mismatches: int) -> float | None:
    """The ecosystem's cosine similarity of (actual, golden) pairs, in Python floats."""
    if mismatches or len(products) < 2:
        return None
    dot = math.fsum(a * g for a, g in products)
    norm_a = math.sqrt(math.fsum(a * a for a, _ in products))
    norm_g = math.sqrt(math.fsum(g * g for _, g in products))
    eps = np.finfo(np.float64).eps
    if norm_a <= eps and norm_g <= eps:
        return 1.0
    return None if min(norm_a, norm_g) <= eps else dot / (norm_a * norm_g)


def _ecosystem(products, relative, matched, mismatches, max_abs) -> tuple:
    """(cosine, one-thousandth ratio, five-thousandths ratio, accuracy reached)."""
    cosine = _cosine(products, mismatches)
    size = len(products)
    ratios = [None if mismatches else
              (sum(r < t for r in relative) + matched) / size for t in (0.001, 0.005)]
    if mismatches:
        reached = False
    elif cosine is None:
        reached = max_abs <= 0.001
    else:
        reached = not ((cosine < 0.99 and max_abs > 0.001) or cosine < 0.9 or max_abs > 1)
    return (cosine, *ratios, reached)


def _reference_verdict(actual: np.ndarray, expected: np.ndarray, dtype) -> tuple:
    """The verdict's fields, judged element by element in Python floats (SPEC §10, and
    the ecosystem's metrics: relative error against max(|golden|, small value), matched
    NaN/Inf as zeros)."""
    standard, small = STANDARDS[np.dtype(dtype)], SMALL_VALUES[np.dtype(dtype)]
    errors, relative, ok, hard, finite, mismatches = [], [], 0, 0, 0, []
    products, matches = [], 0
    for i, (a, g) in enumerate(zip(actual.ravel().tolist(), expected.ravel().tolist())):
        if math.isfinite(a) and math.isfinite(g):
            finite += 1
            error = abs(a - g)
            errors.append(error)
            relative.append(error / max(abs(g), small))
            products.append((a, g))
            ok += error <= standard.atol + standard.rtol * abs(g)
            hard += error > standard.limit and error > HARD_ULPS * _ulp(abs(g), dtype)
        else:
            errors.append(0.0)
            products.append((0.0, 0.0))
            matched = (math.isnan(a) and math.isnan(g)) or (math.isinf(a) and a == g)
            ok += matched
            matches += matched
            if not matched:
                mismatches.append(i)
    if not errors:
        return (True, 0, 1.0, 0.0, 0.0, 0, 0, None, None, None, "empty output",
                None, None, None, True)
    worst = errors.index(max(errors)) if finite or not mismatches else mismatches[0]
    fraction = ok / len(errors)
    reasons = [f"{len(mismatches)} NaN/Inf mismatches"] if mismatches else []
    if hard:
        reasons.append(f"{hard} elements past the hard limit and {HARD_ULPS} ULP")
    if fraction < PASS_FRACTION:
        reasons.append(f"only {fraction:.2%} of elements within tolerance")
    index = list(np.unravel_index(worst, actual.shape)) if actual.ndim else []
    return (not reasons, len(errors), fraction, max(errors), max(relative, default=0.0), hard,
            len(mismatches), [int(i) for i in index], float(actual.ravel()[worst]),
            float(expected.ravel()[worst]), "; ".join(reasons) or "pass",
            *_ecosystem(products, relative, matches, len(mismatches), max(errors)))


COSINE = [f.name for f in dataclasses.fields(Verdict)].index("cosine_similarity")


def _fields(verdict) -> str:
    """Every field but the cosine similarity, exactly (repr tells NaN, -0.0 and the types
    apart); the cosine, a sum over the elements, is compared to rounding (`_same_cosine`)."""
    fields = verdict if isinstance(verdict, tuple) else dataclasses.astuple(verdict)
    return repr(fields[:COSINE] + fields[COSINE + 1:])


def _same_cosine(first, second) -> bool:
    one, two = (v if isinstance(v, tuple) else dataclasses.astuple(v) for v in (first, second))
    if one[COSINE] is None or two[COSINE] is None:
        return one[COSINE] is two[COSINE]
    return one[COSINE] == pytest.approx(two[COSINE], rel=1e-12, abs=1e-15)


def _tallied(actual: np.ndarray, expected: np.ndarray, runs: list[tuple[int, int]]):
    tally = Tally(actual.dtype, actual.shape)
    flat_a, flat_g = actual.ravel(), expected.ravel()
    for start, stop in runs:
        tally.add(flat_a[start:stop], flat_g[start:stop], start)
    return tally.verdict()


def _runs(rng: np.random.Generator, size: int, shuffled: bool) -> list[tuple[int, int]]:
    """[start, stop) runs covering 0..size, of random lengths (empty ones included)."""
    cuts = np.sort(rng.integers(0, size + 1, rng.integers(0, 12))).tolist()
    bounds = [0, *cuts, size]
    runs = list(zip(bounds[:-1], bounds[1:]))
    if shuffled:
        rng.shuffle(runs)
    return runs


KINDS = ("exact", "near", "loose", "far", "tie", "pool", "special", "half")
POOL = [0.0, -0.0, 1.0, -1.0, 0.25, 3.0, 1e-30, 5e-324, 1e-6, 65504.0, 1e300, -1e300]
NONFINITE = [math.nan, math.inf, -math.inf]


def _outputs(rng, dtype, shape, kinds, scale) -> tuple[np.ndarray, np.ndarray]:
    """(actual of `dtype`, float64 golden): each element of a kind of `kinds` - exact,
    within tolerance, past it, past the hard limit, off by one error of the output (ties),
    both from a small pool of values, both NaN/Inf, or one NaN/Inf."""
    standard, size = STANDARDS[dtype], math.prod(shape)
    kind = rng.choice(sorted(kinds), size)
    g = rng.normal(0, 1, size) * 10.0**scale
    sign = rng.choice([-1.0, 1.0], size)
    tolerance = standard.atol + standard.rtol * np.abs(g)
    a = np.select([kind == "near", kind == "loose", kind == "far"],
                  [g + sign * tolerance * rng.uniform(0, 0.5, size),
                   g + sign * tolerance * rng.uniform(1.5, 3, size),
                   g + sign * (standard.limit + np.abs(g)) * rng.uniform(2, 4, size)], g)
    tie = kind == "tie"
    g[tie] = rng.choice([0.0, 1.0, -1.0, 2.0], tie.sum())
    a[tie] = g[tie] + sign[tie] * 0.75 * 2.0**scale
    pool = kind == "pool"
    a[pool], g[pool] = rng.choice(POOL, pool.sum()), rng.choice(POOL, pool.sum())
    special = kind == "special"
    a[special], g[special] = (rng.choice(NONFINITE, special.sum()),
                              rng.choice(NONFINITE, special.sum()))
    half = kind == "half"
    which = rng.integers(0, 2, size).astype(bool)
    for side, chosen in ((a, half & which), (g, half & ~which)):
        side[chosen] = rng.choice(NONFINITE, chosen.sum())
    with np.errstate(over="ignore"):
        return a.astype(dtype).reshape(shape), g.reshape(shape)


@settings(max_examples=200)
@given(dtype=st.sampled_from(FLOATS), shape=st.lists(st.integers(1, 8), max_size=3),
       kinds=st.sets(st.sampled_from(KINDS), min_size=1), scale=st.integers(-4, 4),
       seed=st.integers(0, 2**32 - 1), shuffled=st.booleans())
def test_tally_in_chunks_equals_compare(dtype, shape, kinds, scale, seed, shuffled):
    rng = np.random.default_rng(seed)
    actual, expected = _outputs(rng, dtype, tuple(shape), kinds, scale)
    whole = compare(actual, expected)
    reference = _reference_verdict(actual, expected, dtype)
    assert _fields(reference) == _fields(whole)
    assert _same_cosine(reference, whole)
    chunked = _tallied(actual, expected, _runs(rng, actual.size, shuffled))
    assert _fields(chunked) == _fields(whole)
    assert _same_cosine(chunked, whole)


def _fail_by(reason: str, dtype) -> tuple[np.ndarray, np.ndarray]:
    """An output of 300 elements (values 1) failing by one reason only."""
    limit = STANDARDS[dtype].limit
    g = np.ones(300)
    a = g.copy()
    if reason == "fraction":
        a[10:20] += limit / 2
    elif reason == "hard":
        a[150] += 10 * limit + 10
    else:
        a[[40, 90]] = [math.nan, math.inf]
    return a.astype(dtype), g


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("reason, words", [("fraction", "within tolerance"),
                                           ("hard", "hard limit"), ("mismatch", "NaN/Inf")])
def test_tally_fails_as_compare_does(dtype, reason, words):
    actual, expected = _fail_by(reason, dtype)
    verdict = _tallied(actual, expected, [(200, 300), (0, 7), (7, 200)])
    assert not verdict.passed and words in verdict.reason and ";" not in verdict.reason
    assert _fields(verdict) == _fields(_reference_verdict(actual, expected, dtype))


def test_tally_worst_is_the_first_of_tied_maxima():
    expected = np.zeros(12)
    actual = expected.copy()
    actual[[3, 7, 10]] = [0.5, -0.5, 0.5]
    actual = actual.astype(np.float32).reshape(3, 4)
    verdict = _tallied(actual, expected.reshape(3, 4), [(8, 12), (4, 8), (0, 4)])
    assert verdict.worst_index == [0, 3] and verdict.max_abs_error == 0.5


def test_tally_with_no_error_names_the_first_element_even_if_not_finite():
    """NaN/Inf count as error 0: with every error 0, compare's worst is element 0."""
    actual = np.array([math.nan, math.inf, 1.0], np.float32)
    expected = np.array([math.nan, -math.inf, 1.0])
    verdict = _tallied(actual, expected, [(2, 3), (0, 2)])
    assert verdict.worst_index == [0] and math.isnan(verdict.worst_actual)
    assert _fields(verdict) == _fields(compare(actual, expected))
    assert _fields(verdict) == _fields(_reference_verdict(actual, expected, np.float32))


def test_tally_without_finite_elements_names_the_first_mismatch():
    actual = np.array([math.nan, math.inf, -math.inf, math.nan], np.float16)
    expected = np.array([math.nan, math.inf, math.inf, -math.inf])
    verdict = _tallied(actual, expected, [(3, 4), (2, 3), (0, 2)])
    assert verdict.worst_index == [2] and verdict.worst_actual == -math.inf
    assert verdict.special_mismatches == 2 and verdict.max_abs_error == 0.0


def test_tally_of_an_empty_output():
    actual, expected = np.empty((4, 0), np.float32), np.empty((4, 0))
    verdict = _tallied(actual, expected, [(0, 0), (0, 0)])
    assert _fields(verdict) == _fields(Tally(np.float32, (4, 0)).verdict())
    assert _fields(verdict) == _fields(compare(actual, expected))
    assert _fields(verdict) == _fields(_reference_verdict(actual, expected, np.float32))


def test_tally_refuses_what_does_not_fit():
    with pytest.raises(ValueError, match="no precision standard"):
        Tally(np.int32, (3,))
    tally = Tally(np.float32, (2, 3))
    with pytest.raises(ValueError, match="actual has 2 elements, golden 3"):
        tally.add(np.ones(2, np.float32), np.ones(3), 0)
    with pytest.raises(ValueError, match="not all within"):
        tally.add(np.ones(3, np.float32), np.ones(3), 4)
    tally.add(np.ones(3, np.float32), np.ones(3), 0)
    with pytest.raises(ValueError, match="3 elements added to a tally of 6"):
        tally.verdict()


# --- drawing the inputs in chunks ---------------------------------------------------------

SPECIAL_VALUES = {"nan": math.nan, "inf": math.inf, "-inf": -math.inf}
RULES = [[-2.5, 3.75], [-3, 5], [-1e6, 1e6], [0, 1], 2.5, -7, "nan", "-inf",
         ["nan", 1.5, "-inf", -2, "inf"], [4.0],
         {"name": "nd", "mean": [-1, 1], "std": [0.5, 2]}]
DRAW_DTYPES = [np.dtype(np.float32), np.dtype(np.float16), BF16, np.dtype(np.int32),
               np.dtype(np.int8), np.dtype(np.bool_)]
SHAPES = [(), (0,), (3, 0, 2), (1,), (6,), (7,), (15,), (4, 5), (2, 3, 5)]


def _whole_draw(spec: TensorInput, rng: np.random.Generator) -> np.ndarray:
    """The tensor drawn for its whole shape at once in float64 (int64 for integer ranges),
    then cast."""
    values, shape, dtype = spec.values, spec.shape, spec.dtype
    if isinstance(values, dict):
        mean = rng.uniform(*values["mean"])
        data = rng.normal(mean, rng.uniform(*values["std"]), shape)
    elif isinstance(values, list) and len(values) == 2 and not any(
            isinstance(v, str) for v in values):
        if dtype == np.bool_:
            data = rng.integers(0, 2, shape)
        elif dtype.kind in "iu":
            data = rng.integers(math.ceil(values[0]), math.floor(values[1]) + 1, shape)
        else:
            data = rng.uniform(values[0], values[1], shape)
    elif isinstance(values, list):
        data = rng.choice([SPECIAL_VALUES.get(v, v) for v in values], shape)
    else:
        data = np.full(shape, SPECIAL_VALUES.get(values, values), np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        return np.asarray(data).astype(dtype)


@pytest.mark.filterwarnings("error")
@pytest.mark.parametrize("chunk", [1, 7])
@pytest.mark.parametrize("dtype", DRAW_DTYPES, ids=str)
@pytest.mark.parametrize("values", RULES, ids=repr)
def test_chunked_draw_equals_the_whole_draw(monkeypatch, chunk, dtype, values):
    """Tensor after tensor from one Generator: the same bits, and the same state after."""
    monkeypatch.setattr(cases, "DRAW_CHUNK", chunk)
    chunked_rng, whole_rng = np.random.default_rng(21), np.random.default_rng(21)
    for shape in SHAPES:
        spec = TensorInput(dtype, shape, values)
        drawn, expected = draw_tensor(spec, chunked_rng), _whole_draw(spec, whole_rng)
        assert (drawn.dtype, drawn.shape) == (expected.dtype, expected.shape)
        assert drawn.tobytes() == expected.tobytes()
        assert chunked_rng.bit_generator.state == whole_rng.bit_generator.state
    assert chunked_rng.random(5).tobytes() == whole_rng.random(5).tobytes()


def test_draw_holds_one_chunk_of_float64_at_a_time():
    spec = TensorInput(np.dtype(np.float16), (4_000_000,), [-1, 1])
    chunk_bytes = 8 * cases.DRAW_CHUNK
    assert 2**16 <= cases.DRAW_CHUNK <= 2**21
    tracemalloc.start()
    try:
        drawn = draw_tensor(spec, np.random.default_rng(0))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < drawn.nbytes + 2 * chunk_bytes < 8 * drawn.size


# --- the ecosystem's metrics, by hand ---------------------------------------------------------

def test_ecosystem_metrics_by_hand():
    """float32 actual [1, 2, 0, 3] against golden [1, 2.002, 1e-9, -3]: errors 0, 0.002,
    1e-9, 6; relative errors against max(|golden|, 1e-6): 0, 0.002/2.002 (< 0.001),
    1e-9/1e-6 = 0.001 (not < 0.001), 2; cosine (1 + 4.004 - 9) / (sqrt(14) sqrt(14.008004
    + 1e-18)); max abs error 6 > 1: accuracy not reached."""
    actual = np.array([1, 2, 0, 3], np.float32)
    golden = np.array([1, 2.002, 1e-9, -3])
    verdict = compare(actual, golden)
    assert verdict.max_abs_error == 6.0
    assert verdict.max_rel_error == 2.0
    assert verdict.one_thousandth_ratio == 2 / 4
    assert verdict.five_thousandths_ratio == 3 / 4
    expected = (1 + 4.004 - 9) / (math.sqrt(14) * math.sqrt(1 + 2.002**2 + 1e-18 + 9))
    assert verdict.cosine_similarity == pytest.approx(expected, rel=1e-14)
    assert verdict.accuracy_reached is False


@pytest.mark.parametrize("actual, golden, cosine, reached", [
    ([0.0, 0.0], [0.0, 0.0], 1.0, True),  # both zero: cosine 1
    ([0.0, 0.0], [0.5, 0.0], None, False),  # one zero: N/A, judged by max abs error 0.5
    ([1e-4, 0.0], [0.0, 0.0], None, True),  # N/A, max abs error 1e-4 <= 0.001
    ([1.0, 2.0], [1.0, 2.0005], 1.0, True),  # cosine ~1, error 5e-4
    ([1.0, 0.0], [0.0, 1.0], 0.0, False),  # orthogonal: cosine 0 < 0.9
    ([2.5], [2.5], None, True),  # a single element: N/A
    ([np.nan, 1.0], [np.nan, 1.0], 1.0, True),  # matched NaN counts as equal zeros
    ([np.inf, 1.0], [1.0, 1.0], None, False),  # unmatched Inf: N/A, not reached
])
def test_ecosystem_cosine_and_verdict_rules(actual, golden, cosine, reached):
    verdict = compare(np.array(actual, np.float32), np.array(golden))
    assert verdict.cosine_similarity == (None if cosine is None else pytest.approx(cosine))
    assert verdict.accuracy_reached is reached
    if not np.isinf(actual).any():
        assert verdict.one_thousandth_ratio is not None


def test_a_near_zero_golden_has_a_relative_error_against_the_small_value():
    """golden 1e-15, actual 1e-7 in float16 / float32: |error| / max(|golden|, small value)
    = 1e-7 / 1e-3 and 1e-7 / 1e-6, not 1e8."""
    for dtype, small in ((np.float16, 1e-3), (np.float32, 1e-6)):
        actual = np.array([1e-7, 1.0], dtype)
        verdict = compare(actual, np.array([1e-15, 1.0]))
        assert verdict.max_rel_error == pytest.approx(abs(float(actual[0]) - 1e-15) / small)
