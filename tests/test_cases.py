"""Case files at unit level (aclnn.user.cases: parsing, value rules, attribute draws) and
the precision standard of SPEC §10 (aclnn.user.precision.compare) at its boundaries."""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np
import pytest

from aclnn.user.cases import (
    CaseFileError,
    TensorInput,
    draw_attrs,
    draw_inputs,
    draw_tensor,
    parse_cases,
)
from aclnn.user.precision import STANDARDS, compare, ulp

BF16 = np.dtype(ml_dtypes.bfloat16)
FLOAT_DTYPES = {"fp32": np.dtype(np.float32), "fp16": np.dtype(np.float16), "bf16": BF16}


def tensor(name, dtype, shape, values):
    return {"name": name, "type": "tensor", "dtype": dtype, "shape": shape,
            "range_values": values}


def attr(name, dtype, value, kind="attr"):
    return {"name": name, "type": kind, "dtype": dtype, "range_values": value}


def one_case(aclnn_name, inputs, **extra):
    (case,) = parse_cases([{"id": "c", "aclnn_name": aclnn_name, "inputs": inputs, **extra}])
    return case


def l1_case(self_values=None, dtype="fp32", shape=(1000,), extra_inputs=()):
    values = [-1, 1] if self_values is None else self_values
    return one_case("aclnnL1LossBackward", [
        tensor("gradOutput", "fp32", [1], 1), tensor("self", dtype, list(shape), values),
        tensor("target", "fp32", [1], 0), *extra_inputs])


def case_inputs_l1():
    return [tensor(t, "fp32", [2], 1) for t in ("gradOutput", "self", "target")]


def cases_raw():
    return {"id": 0, "aclnn_name": "L1LossBackward", "inputs": case_inputs_l1()}


def draw_self(values, dtype="fp32", shape=(4000,), seed=0) -> np.ndarray:
    """`self` of an L1LossBackward case whose file gives it `values` (parsed, then drawn)."""
    case = l1_case(values, dtype, shape)
    return draw_tensor(case.tensors["self"], np.random.default_rng(seed))


# --- tensor value rules -------------------------------------------------------------------

@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_uniform_range_stays_within_bounds_in_dtype(dtype):
    values = draw_self([-2, 3], dtype, (50, 80))
    assert values.dtype == FLOAT_DTYPES[dtype] and values.shape == (50, 80)
    wide = values.astype(np.float64)
    assert wide.min() >= -2 and wide.max() <= 3
    assert wide.min() < -1.95 and wide.max() > 2.95  # spread over the whole range
    assert abs(wide.mean() - 0.5) < 0.1  # uniform: the mean is the midpoint
    assert len(np.unique(wide)) > 100
    # every value is exactly representable in the dtype (it was rounded once)
    assert np.array_equal(wide.astype(FLOAT_DTYPES[dtype]).astype(np.float64), wide)


def test_range_draws_in_float64_then_rounds_once():
    """A range narrower than a float16 ULP still spreads in float32 but not in float16."""
    lo, hi = 1.0, 1.0 + 2.0**-12
    assert len(np.unique(draw_self([lo, hi], "fp32"))) > 100
    assert set(np.unique(draw_self([lo, hi], "fp16")).tolist()) <= {1.0}


@pytest.mark.parametrize("values, expected", [(1.5, 1.5), (-3, -3.0), (0, 0.0), ([0.25], 0.25),
                                              (1e10, 1e10)])
def test_bare_number_fills_every_element(values, expected):
    drawn = draw_self(values, "fp32", (3, 7))
    assert drawn.dtype == np.float32 and drawn.shape == (3, 7)
    assert np.all(drawn == np.float32(expected))


def test_fill_is_rounded_to_the_dtype():
    drawn = draw_self(0.1, "fp16", (5,))
    assert drawn.dtype == np.float16 and np.all(drawn == np.float16(0.1))
    assert np.all(np.isposinf(draw_self(1e6, "fp16", (5,))))  # beyond float16's range


@pytest.mark.parametrize("values", ["nan", ["nan"], "NaN"])
@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_nan_fill(values, dtype):
    drawn = draw_self(values, dtype, (2, 3))
    assert drawn.dtype == FLOAT_DTYPES[dtype] and drawn.shape == (2, 3)
    assert np.all(np.isnan(drawn.astype(np.float64)))


@pytest.mark.parametrize("values, sign", [("inf", 1), (["inf"], 1), ("-inf", -1), (["-inf"], -1),
                                          ("+inf", 1)])
@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_infinity_fill(values, sign, dtype):
    drawn = draw_self(values, dtype, (6,)).astype(np.float64)
    assert np.all(drawn == sign * math.inf)


def test_list_of_values_draws_only_those_values():
    drawn = draw_self(["nan", "inf", "-inf", 0, 1.5], "fp16", (4000,)).astype(np.float64)
    counts = {"nan": np.isnan(drawn).sum(), "inf": (drawn == math.inf).sum(),
              "-inf": (drawn == -math.inf).sum(), "0": (drawn == 0).sum(),
              "1.5": (drawn == 1.5).sum()}
    assert sum(counts.values()) == drawn.size  # nothing else
    assert all(600 < n < 1000 for n in counts.values()), counts  # about a fifth each
    drawn = draw_self([-1, 2, 7.25], "fp32", (3000,))
    assert set(np.unique(drawn).tolist()) == {-1.0, 2.0, 7.25}


def test_nd_distribution_mean_and_std_are_drawn_from_their_ranges():
    spec = {"name": "nd", "mean": [2, 3], "std": [0.5, 1.0]}
    means, stds = [], []
    for seed in range(30):
        drawn = draw_self(spec, "fp32", (20000,), seed).astype(np.float64)
        means.append(drawn.mean())
        stds.append(drawn.std())
        # a normal distribution: about 68 % within one (sample) std of the (sample) mean
        inside = np.abs(drawn - drawn.mean()) < drawn.std()
        assert 0.66 < inside.mean() < 0.70
    assert all(2 - 0.05 < m < 3 + 0.05 for m in means), means
    assert all(0.5 - 0.03 < s < 1.0 + 0.03 for s in stds), stds
    assert max(means) - min(means) > 0.4 and max(stds) - min(stds) > 0.2  # drawn, not fixed


def test_nd_distribution_with_point_ranges():
    drawn = draw_self({"name": "nd", "mean": [-4, -4], "std": [0, 0]}, "fp16", (100,))
    assert drawn.dtype == np.float16 and np.all(drawn == -4)


@pytest.mark.parametrize("dtype, values, expected", [
    ("int32", [-3, 3], set(range(-3, 4))),
    ("int8", [0.5, 3.5], {1, 2, 3}),
    ("int64", [5, 5], {5}),
    ("uint8", [0, 255], None),
])
def test_integer_dtypes_draw_integers_within_the_range(dtype, values, expected):
    drawn = draw_self(values, dtype, (5000,))
    assert drawn.dtype == np.dtype(dtype)
    if expected is None:
        assert drawn.min() >= 0 and drawn.max() <= 255 and len(np.unique(drawn)) > 200
    else:
        assert set(np.unique(drawn).tolist()) == expected


def test_bool_dtype_draws_both_values():
    drawn = draw_self([0, 1], "bool", (200,))
    assert drawn.dtype == np.bool_ and set(np.unique(drawn).tolist()) == {False, True}


def test_direct_tensor_input_draws_by_its_rule():
    rng = np.random.default_rng(3)
    spec = TensorInput(np.dtype(np.float16), (2, 0, 3), [-1, 1])
    assert draw_tensor(spec, rng).shape == (2, 0, 3)
    scalar = draw_tensor(TensorInput(np.dtype(np.float32), (), 2.5), rng)
    assert scalar.shape == () and scalar == 2.5


def test_draws_depend_only_on_the_generator():
    case = one_case("SmoothL1LossBackward", [
        tensor("gradOut", "fp16", [5, 4], [-2, 2]), tensor("self", "bf16", [4], [-3, 3]),
        tensor("target", "fp32", [5, 1], {"name": "nd", "mean": [0, 1], "std": [1, 2]}),
        attr("beta", "float32", [0.5, 2.0])])
    first = draw_inputs(case, np.random.default_rng([4, 0]))
    again = draw_inputs(case, np.random.default_rng([4, 0]))
    other = draw_inputs(case, np.random.default_rng([4, 1]))
    assert list(first[0]) == ["gradOut", "self", "target"]  # the operator's order
    for name in first[0]:
        assert np.array_equal(first[0][name], again[0][name])
        assert not np.array_equal(first[0][name], other[0][name])
    assert first[1] == again[1] and first[1]["beta"] != other[1]["beta"]


# --- attributes -----------------------------------------------------------------------------

def _draws(case, count=300):
    return [draw_attrs(case, np.random.default_rng(seed)) for seed in range(count)]


def test_int_attribute_range_is_inclusive():
    case = l1_case(extra_inputs=[attr("reduction", "int", [0, 2])])
    values = [a["reduction"] for a in _draws(case)]
    assert all(type(v) is int for v in values)
    assert set(values) == {0, 1, 2}


@pytest.mark.parametrize("value, expected", [([2], 2), (1, 1), (2.0, 2), ([0], 0)])
def test_int_attribute_value(value, expected):
    case = l1_case(extra_inputs=[attr("reduction", "int", value)])
    drawn = draw_attrs(case, np.random.default_rng(0))["reduction"]
    assert drawn == expected and type(drawn) is int


def _smooth_l1(*attributes):
    return one_case("SmoothL1LossBackward", [
        tensor("gradOut", "fp32", [2], 1), tensor("self", "fp32", [2], 1),
        tensor("target", "fp32", [2], 1), *attributes])


def test_float_attribute_range_and_values():
    values = [a["beta"] for a in _draws(_smooth_l1(attr("beta", "float32", [0.25, 0.75])))]
    assert all(type(v) is float and 0.25 <= v <= 0.75 for v in values)
    assert min(values) < 0.3 and max(values) > 0.7
    for value, expected in ((2, 2.0), ([0.5], 0.5), (1.25, 1.25)):
        drawn = draw_attrs(_smooth_l1(attr("beta", "float32", value)),
                           np.random.default_rng(0))["beta"]
        assert drawn == expected and type(drawn) is float
    drawn = draw_attrs(_smooth_l1(attr("beta", "float", "inf")), np.random.default_rng(0))
    assert drawn["beta"] == math.inf


def _pool(*attributes):
    return one_case("AvgPool2dBackward", [
        tensor("gradOutput", "fp32", [1, 1, 2, 2], 1), tensor("self", "fp32", [1, 1, 4, 4], 0),
        *attributes])


@pytest.mark.parametrize("value, expected", [(True, True), (False, False), (1, True), (0, False),
                                             ([True], True)])
def test_bool_attribute(value, expected):
    drawn = draw_attrs(_pool(attr("ceil_mode", "bool", value)), np.random.default_rng(0))
    assert drawn["ceil_mode"] is expected


def test_string_attribute():
    case = one_case("GeluBackwardV2", [tensor("gradOutput", "fp32", [2], 1),
                                       tensor("self", "fp32", [2], 1),
                                       attr("approximate", "string", "tanh")])
    assert draw_attrs(case, np.random.default_rng(0)) == {"approximate": "tanh"}


def test_defaults_fill_missing_attributes_and_unknown_ones_are_ignored():
    case = _smooth_l1(attr("reduction", "string", "sum"), attr("alpha", "float32", 3.0))
    assert draw_attrs(case, np.random.default_rng(0)) == {"reduction": "sum", "beta": 1.0}


def test_list_valued_attributes_give_lists():
    entries = [attr("kernel_size", "int", 3, "attrs"), attr("kernel_size", "int", [1, 2],
                                                            "attrs")]
    case = _pool(entries, [attr("stride", "int", 2, "attrs")],
                 [attr("padding", "int", [1], "attrs")])
    drawn = _draws(case, 100)
    assert all(d["kernel_size"][0] == 3 and d["kernel_size"][1] in (1, 2) for d in drawn)
    assert {d["kernel_size"][1] for d in drawn} == {1, 2}
    assert all(d["stride"] == [2] and d["padding"] == [1] for d in drawn)
    assert drawn[0]["count_include_pad"] is True and drawn[0]["divisor_override"] == 0


@pytest.mark.parametrize("dtype, value", [
    ("int", 1.5), ("int", "two"), ("int", [1, 2, 3]), ("int", True), ("bool", 2),
    ("bool", "yes"), ("string", 3), ("float32", "abc"), ("double", 1.0), ("int", None),
])
def test_attribute_values_that_do_not_fit_their_dtype(dtype, value):
    with pytest.raises(CaseFileError, match=r"case 0 \(id 'c'\): inputs\[3\]"):
        l1_case(extra_inputs=[attr("reduction", dtype, value)])


# --- operator names, aliases, ignored fields -----------------------------------------------

@pytest.mark.parametrize("name, expected", [
    ("aclnnSmoothL1LossBackward", "SmoothL1LossBackward"),
    ("SmoothL1LossBackward", "SmoothL1LossBackward"),
    ("aclnnGeluBackwardV2", "GeluBackwardV2"), ("L1LossBackward", "L1LossBackward"),
    ("AvgPool2dBackward", "AvgPool2dBackward"),
])
def test_aclnn_prefix_is_optional(name, expected):
    case = one_case(name, [tensor(t, "fp32", [4], 1) for t in
                           ("gradOutput", "self", "target")[: 3 if "Loss" in name else 2]]
                    + ([[attr("kernel_size", "int", 2, "attrs")]] if "Pool" in name else []))
    assert case.op.name == expected


@pytest.mark.parametrize("name", ["aclnnFoo", "smoothl1lossbackward", "aclnn", "", 7, None,
                                  "aclnnaclnnL1LossBackward"])
def test_unknown_operator_names_are_refused(name):
    with pytest.raises(CaseFileError, match="aclnn_name"):
        parse_cases([{"id": 0, "aclnn_name": name, "inputs": []}])


@pytest.mark.parametrize("op, given, canonical", [
    ("SmoothL1LossBackward", "gradOutput", "gradOut"),
    ("SmoothL1LossBackward", "gradOut", "gradOut"),
    ("L1LossBackward", "gradOut", "gradOutput"),
    ("GeluBackwardV2", "gradOut", "gradOutput"),
    ("AvgPool2dBackward", "gradOut", "gradOutput"),
])
def test_gradient_name_aliases(op, given, canonical):
    others = {"SmoothL1LossBackward": ("self", "target"), "L1LossBackward": ("self", "target"),
              "GeluBackwardV2": ("self",), "AvgPool2dBackward": ("self",)}[op]
    inputs = [tensor(given, "fp16", [2], 0.5)] + [tensor(t, "fp32", [2], 1) for t in others]
    case = one_case(op, inputs)
    assert set(case.tensors) == {canonical, *others}
    assert case.tensors[canonical].dtype == np.float16


def test_unknown_fields_are_ignored_and_expected_status_is_read():
    case = one_case("aclnnL1LossBackward", [
        {**tensor("gradOutput", "fp32", [2], 1), "format": "ND", "is_boundary": True},
        tensor("self", "fp32", [2], 1), tensor("target", "fp32", [2], 1)],
        name="x", api_type="aclnn", standard="default", is_boundary=False, extra={"a": 1},
        expected_status=161002)
    assert case.expected_status == 161002 and case.index == 0 and case.id == "c"
    assert case.label == "case 0 (id 'c')"
    with pytest.raises(CaseFileError, match="expected_status"):
        one_case("L1LossBackward", case_inputs_l1(), expected_status="161002")


def test_case_ids_default_to_the_index_and_errors_name_the_case():
    cases = parse_cases([{"aclnn_name": "L1LossBackward", "inputs": case_inputs_l1()}] * 3)
    assert [(c.index, c.id) for c in cases] == [(0, 0), (1, 1), (2, 2)]
    bad = {"id": "z", "aclnn_name": "L1LossBackward", "inputs": case_inputs_l1()[:2]}
    with pytest.raises(CaseFileError, match=r"case 2 \(id 'z'\).*target"):
        parse_cases([cases_raw() for _ in range(2)] + [bad])


@pytest.mark.parametrize("values", [[3, -3], [], {"name": "nd", "mean": [1, 0], "std": [0, 1]},
                                    {"name": "nd", "mean": [0, 1], "std": [-1, 1]},
                                    {"name": "uniform"}, "abc", [1, "x"], "", True])
def test_bad_value_rules_are_refused(values):
    with pytest.raises(CaseFileError, match=r"inputs\[1\] \(self\)\.range_values"):
        l1_case(values)


# --- the precision standard -----------------------------------------------------------------

# (rtol, atol, hard limit) of SPEC §10
SPEC_STANDARDS = {np.dtype(np.float16): (2.0**-9, 2.0**-9, 0.1),
                  BF16: (2.0**-6, 2.0**-6, 1.0),
                  np.dtype(np.float32): (2.0**-10, 2.0**-16, 0.01)}
MANTISSA = {np.dtype(np.float16): 10, BF16: 7, np.dtype(np.float32): 23}


def test_standards_are_those_of_the_spec():
    assert {d: (s.rtol, s.atol, s.limit) for d, s in STANDARDS.items()} == SPEC_STANDARDS


def _next_up(value: float, dtype) -> float:
    """The next value of `dtype` above `value` (which must be one of its values)."""
    step = 2.0 ** (math.frexp(value)[1] - 1 - MANTISSA[np.dtype(dtype)])
    result = value + step
    assert float(np.asarray(result).astype(dtype)) == result
    return result


@pytest.mark.parametrize("dtype", list(SPEC_STANDARDS))
@pytest.mark.parametrize("golden", [0.0, 1.0, -2.0, 3.0])
def test_tolerance_boundary(dtype, golden):
    """|a - g| == atol + rtol * |g| is ok; the next value of the dtype beyond is not."""
    rtol, atol, _ = SPEC_STANDARDS[dtype]
    edge = abs(golden) + atol + rtol * abs(golden)
    assert float(np.asarray(edge).astype(dtype)) == edge  # exactly representable
    sign = -1.0 if golden < 0 else 1.0
    at = compare(np.array([sign * edge], dtype), np.array([golden]))
    assert at.passed and at.ok_fraction == 1.0
    beyond = compare(np.array([sign * _next_up(edge, dtype)], dtype), np.array([golden]))
    assert not beyond.passed and beyond.ok_fraction == 0.0
    assert beyond.hard_failures == 0  # within the hard limit: only the 99 % rule failed


def _hundred(dtype, bad_count, bad_error, golden=1.0, total=100):
    g = np.full(total, golden)
    a = g.copy()
    a[:bad_count] += bad_error
    return compare(a.astype(dtype), g)


@pytest.mark.parametrize("dtype", list(SPEC_STANDARDS))
def test_ninety_nine_percent_rule(dtype):
    _, _, limit = SPEC_STANDARDS[dtype]
    error = limit / 2  # past the tolerance, within the hard limit
    one = _hundred(dtype, 1, error)
    assert one.passed and one.ok_fraction == pytest.approx(0.99) and one.hard_failures == 0
    two = _hundred(dtype, 2, error)
    assert not two.passed and two.ok_fraction == pytest.approx(0.98)
    assert "within tolerance" in two.reason
    assert _hundred(dtype, 10, error, total=1000).passed
    assert not _hundred(dtype, 11, error, total=1000).passed


@pytest.mark.parametrize("dtype, golden, small, large", [
    # 32 ULP at 2^20 in float32 is 4; the limit is 0.01
    (np.float32, 2.0**20, 1.0, 8.0),
    # 32 ULP at 1024 in float16 is 32; the limit is 0.1
    (np.float16, 1024.0, 16.0, 64.0),
    # 32 ULP at 2^10 in bfloat16 is 256; the limit is 1
    (BF16, 1024.0, 128.0, 512.0),
])
def test_hard_limit_and_32_ulp_rule(dtype, golden, small, large):
    _, _, limit = SPEC_STANDARDS[np.dtype(dtype)]
    ulps32 = 32 * float(ulp(np.array([golden]), STANDARDS[np.dtype(dtype)])[0])
    assert limit < small < ulps32 < large
    # past the limit but within 32 ULP: not a hard failure; one bad element of 1000 passes
    within = _hundred(dtype, 1, small, golden, total=1000)
    assert within.passed and within.hard_failures == 0
    # past both: fails although at least 99.9 % are within tolerance (for float32 at 2^20
    # even the bad element is: rtol * 2^20 = 1024)
    past = _hundred(dtype, 1, large, golden, total=1000)
    assert not past.passed and past.hard_failures == 1 and past.ok_fraction >= 0.999
    assert "hard limit" in past.reason


@pytest.mark.parametrize("dtype", list(SPEC_STANDARDS))
def test_hard_limit_at_small_values(dtype):
    """Near 1, 32 ULP is far below the limit: just past the limit fails, just below not."""
    _, _, limit = SPEC_STANDARDS[dtype]
    below = _hundred(dtype, 1, limit * 0.9, total=1000)
    assert below.passed and below.hard_failures == 0
    above = _hundred(dtype, 1, limit * 1.1, total=1000)
    assert not above.passed and above.hard_failures == 1


def test_ulp_sizes():
    fp32, fp16 = STANDARDS[np.dtype(np.float32)], STANDARDS[np.dtype(np.float16)]
    magnitudes = np.array([1.0, 1.5, 2.0, 3.0, 2.0**-126, 1e-40])
    assert ulp(magnitudes, fp32).tolist() == [2.0**-23, 2.0**-23, 2.0**-22, 2.0**-22,
                                              2.0**-149, 2.0**-149]
    assert ulp(np.array([1.0, 2.0**-14, 2.0**-20]), fp16).tolist() == [2.0**-10, 2.0**-24,
                                                                         2.0**-24]
    for value, dtype in ((1.0, np.float32), (7.0, np.float16), (0.3, np.float32)):
        spacing = float(np.spacing(np.asarray(value, dtype)))
        assert ulp(np.array([value]), STANDARDS[np.dtype(dtype)])[0] == spacing


def test_ulp_at_zero_is_the_smallest_subnormal_spacing():
    """The spacing of a format at 0 is its subnormal spacing, as np.spacing says."""
    for dtype in (np.float32, np.float16):
        spacing = float(np.spacing(np.asarray(0, dtype)))
        assert ulp(np.array([0.0]), STANDARDS[np.dtype(dtype)])[0] == spacing


@pytest.mark.parametrize("dtype", list(SPEC_STANDARDS))
def test_nan_and_infinity_matching(dtype):
    nan, inf = math.nan, math.inf

    def verdict(actual, golden):
        return compare(np.array(actual, dtype), np.array(golden))

    assert verdict([nan, 1.0], [nan, 1.0]).passed
    assert verdict([inf, -inf], [inf, -inf]).passed
    for actual, golden in (([nan], [1.0]), ([1.0], [nan]), ([inf], [-inf]), ([-inf], [inf]),
                           ([inf], [1.0]), ([1.0], [inf]), ([nan], [inf]), ([inf], [nan])):
        result = verdict(actual, golden)
        assert not result.passed and result.special_mismatches == 1, (actual, golden)
        assert "NaN/Inf" in result.reason
    # one mismatch among a thousand fails although 99.9 % of the elements are ok
    many_a, many_g = np.ones(1000), np.ones(1000)
    many_a[7] = nan
    result = compare(many_a.astype(dtype), many_g)
    assert not result.passed and result.ok_fraction == 0.999


def test_empty_arrays_pass():
    for dtype in SPEC_STANDARDS:
        result = compare(np.empty((0, 3), dtype), np.empty((0, 3)))
        assert result.passed and result.elements == 0


def test_compare_checks_its_arguments():
    with pytest.raises(ValueError, match="float64"):
        compare(np.ones(3), np.ones(3))
    with pytest.raises(ValueError):
        compare(np.ones(3, np.float32), np.ones(4))
    # an explicit dtype chooses the standard: float32 values judged as bfloat16
    off = np.full(10, 1 + 2.0**-7, np.float32)
    assert not compare(off, np.ones(10)).passed
    assert compare(off, np.ones(10), BF16).passed


def test_verdict_reports_the_worst_element():
    golden = np.zeros((3, 4))
    actual = golden.astype(np.float32)
    actual[2, 1] = 0.5
    actual[0, 3] = -0.25
    result = compare(actual, golden)
    assert result.worst_index == [2, 1] and result.worst_actual == 0.5
    assert result.worst_golden == 0.0 and result.max_abs_error == 0.5
    assert not result.passed and result.hard_failures == 2
    json = result.to_json()
    assert json["worst_index"] == [2, 1] and json["passed"] is False


# --- found by the fuzzing campaign (tests/test_fuzz.py) -------------------------------------

@pytest.mark.parametrize("names", [[["x"], ["x"]], ["kernel_size", "stride"], [None]])
def test_list_valued_attribute_names_must_be_one_string(names):
    entries = [{"name": n, "type": "attrs", "dtype": "int", "range_values": 1} for n in names]
    with pytest.raises(CaseFileError, match="entries of one name"):
        l1_case(extra_inputs=[entries])


@pytest.mark.parametrize("dtype, values", [
    ("int8", [0, 300]), ("int32", [-1e38, 1e38]), ("int32", [0.2, 0.8]), ("uint8", [-1, 5]),
])
def test_integer_tensor_ranges_must_fit_the_dtype(dtype, values):
    with pytest.raises(CaseFileError, match="must hold integers within"):
        l1_case(values, dtype=dtype)


@pytest.mark.parametrize("value", [[-1e38, 1e38], [0.25, 0.75]])
def test_int_attribute_ranges_must_hold_int64_integers(value):
    with pytest.raises(CaseFileError, match="must hold integers within int64"):
        l1_case(extra_inputs=[attr("reduction", "int", value)])


def test_float_ranges_must_be_finite():
    with pytest.raises(CaseFileError, match="finite lo <= hi"):
        l1_case([-1e308, 1e308])


def test_a_tensor_of_any_size_parses():
    """No element limit when a file is read: a shape of 8.1e9 elements (found by fuzzing,
    when drawing it got the process killed) parses, and `aclnn run` skips it against the
    memory budget before drawing anything (test_run_scale)."""
    case = l1_case(shape=(300, 300, 300, 300))
    assert case.tensors["self"].shape == (300, 300, 300, 300)
