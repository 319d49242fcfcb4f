"""Parameter validation of aclnnGeluBackwardV2 (SPEC §8), rule by rule and in order.

Documented order: nulls (3 tensors and `approximate`) -> gradOutput and self dtypes
supported and promotable, and the promoted dtype EQUALS gradInput's dtype ->
broadcast(gradOutput, self) equals gradInput's shape, rank <= 8 ->
approximate in {"none", "tanh"}.
"""

from __future__ import annotations

import numpy as np
import pytest

import aclnn
from support import (
    DT_NAME,
    NINE,
    SOCS_WITH_BF16,
    SOCS_WITHOUT_BF16,
    check_accepted,
    check_rejected,
    rank_msg_ok,
    run_phase_two,
    shape_str,
)

OP = "aclnnGeluBackwardV2"
NAMES = ("gradOutput", "self", "gradInput")

UNSUPPORTED = ["s32", "f64", "bool", "s64", "u16", "s8", "u8", "s16", "c64"]


def tensors(mk, dtypes=("f32",) * 3, shapes=((2, 3),) * 3):
    """[gradOutput, self, gradInput]."""
    return [mk(shape, dtype) for shape, dtype in zip(shapes, dtypes, strict=True)]


def call(g, x, out, approximate="none"):
    return aclnn.aclnnGeluBackwardV2GetWorkspaceSize(g, x, approximate, out)


def expect_fail(code, args, *needles, absent=(), **kw):
    """Phase 1 fails with `code`; the message names OP and every needle, none of `absent`."""
    return check_rejected(OP, code, call(*args, **kw), needles, absent)


def expect_ok(*args, **kw):
    ws, executor = check_accepted(call(*args, **kw))
    assert run_phase_two(aclnn.aclnnGeluBackwardV2, ws, executor) == 0


# ---------------------------------------------------------------------------- valid


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_valid_baseline(mk, approximate):
    expect_ok(*tensors(mk), approximate=approximate)


@pytest.mark.parametrize("dtype", ["f32", "f16"])
def test_float_dtypes_accepted_on_every_soc(mk, use_soc, dtype):
    for soc in SOCS_WITHOUT_BF16 + SOCS_WITH_BF16:
        use_soc(soc)
        expect_ok(*tensors(mk, dtypes=(dtype,) * 3))


@pytest.mark.parametrize(
    "dtypes",
    [
        ("f16", "f32", "f32"),
        ("f32", "f16", "f32"),
        ("f16", "bf16", "f32"),
        ("bf16", "f32", "f32"),
        ("bf16", "bf16", "bf16"),
    ],
)
def test_promoted_dtype_equal_to_output_accepted(mk, dtypes):
    expect_ok(*tensors(mk, dtypes=dtypes))


@pytest.mark.parametrize("soc", SOCS_WITH_BF16)
def test_bf16_accepted_on_new_socs(mk, use_soc, soc):
    use_soc(soc)
    expect_ok(*tensors(mk, dtypes=("bf16",) * 3))
    expect_ok(*tensors(mk, dtypes=("bf16", "f16", "f32")))


def test_rank_8_accepted(mk):
    shape = (1, 2, 1, 1, 1, 1, 1, 2)
    expect_ok(*tensors(mk, shapes=(shape,) * 3))


def test_broadcast_accepted(mk):
    expect_ok(*tensors(mk, shapes=((2, 1), (1, 3), (2, 3))))
    expect_ok(*tensors(mk, shapes=((3,), (2, 3), (2, 3))))


@pytest.mark.parametrize(
    "shapes",
    [
        ((0,),) * 3,
        ((2, 0, 3),) * 3,
        ((1, 3), (0, 3), (0, 3)),
        ((0, 1), (3,), (0, 3)),
    ],
)
def test_empty_tensors_succeed(mk, shapes):
    for approximate in ("none", "tanh"):
        expect_ok(*tensors(mk, shapes=shapes), approximate=approximate)


# ---------------------------------------------------------------------------- rule 1: nulls


@pytest.mark.parametrize("pos", range(3))
def test_null_tensor(mk, pos):
    args = tensors(mk)
    args[pos] = None
    expect_fail(aclnn.ACLNN_ERR_PARAM_NULLPTR, args, NAMES[pos])


def test_null_approximate(mk):
    expect_fail(aclnn.ACLNN_ERR_PARAM_NULLPTR, tensors(mk), "approximate", approximate=None)


def test_all_null():
    ws, executor, ret = call(None, None, None, approximate=None)
    assert ret == aclnn.ACLNN_ERR_PARAM_NULLPTR
    assert executor is None


# ---------------------------------------------------------------------------- rule 2: dtypes


@pytest.mark.parametrize("dtype", UNSUPPORTED)
@pytest.mark.parametrize("pos", range(2))
def test_unsupported_input_dtype(mk, pos, dtype):
    dtypes = ["f32"] * 3
    dtypes[pos] = dtype
    expect_fail(
        aclnn.ACLNN_ERR_PARAM_INVALID, tensors(mk, dtypes=dtypes), NAMES[pos], DT_NAME[dtype]
    )


@pytest.mark.parametrize("dtype", UNSUPPORTED)
def test_unsupported_output_dtype(mk, dtype):
    args = tensors(mk, dtypes=("f32", "f32", dtype))
    expect_fail(aclnn.ACLNN_ERR_PARAM_INVALID, args, "gradInput", DT_NAME[dtype])


@pytest.mark.parametrize("dtype", UNSUPPORTED)
def test_unsupported_dtype_everywhere(mk, dtype):
    expect_fail(aclnn.ACLNN_ERR_PARAM_INVALID, tensors(mk, dtypes=(dtype,) * 3), DT_NAME[dtype])


@pytest.mark.parametrize(
    "dtypes",
    [
        ("f16", "f32", "f16"),  # promoted f32 != f16 (castable, but GELU demands equality)
        ("f32", "f16", "f16"),
        ("f16", "f16", "f32"),
        ("f32", "f32", "f16"),
        ("f16", "bf16", "bf16"),
        ("f16", "bf16", "f16"),
        ("bf16", "bf16", "f32"),
        ("f32", "bf16", "bf16"),
    ],
)
def test_promoted_dtype_must_equal_output(mk, dtypes):
    expect_fail(
        aclnn.ACLNN_ERR_PARAM_INVALID, tensors(mk, dtypes=dtypes), "gradInput", DT_NAME[dtypes[2]]
    )


@pytest.mark.parametrize("soc", SOCS_WITHOUT_BF16)
@pytest.mark.parametrize("pos", range(3))
def test_bf16_rejected_on_old_socs(mk, use_soc, soc, pos):
    use_soc(soc)
    dtypes = ["f32"] * 3
    dtypes[pos] = "bf16"
    expect_fail(aclnn.ACLNN_ERR_PARAM_INVALID, tensors(mk, dtypes=dtypes), NAMES[pos], "DT_BF16")


@pytest.mark.parametrize("soc", SOCS_WITHOUT_BF16)
def test_all_bf16_rejected_on_old_socs(mk, use_soc, soc):
    use_soc(soc)
    expect_fail(aclnn.ACLNN_ERR_PARAM_INVALID, tensors(mk, dtypes=("bf16",) * 3), "DT_BF16")


# ---------------------------------------------------------------------------- rule 3: shapes


def test_broadcast_impossible(mk):
    shapes = ((2, 3), (4, 3), (2, 3))
    msg = expect_fail(aclnn.ACLNN_ERR_PARAM_INVALID, tensors(mk, shapes=shapes))
    assert "[4, 3]" in msg or "[2, 3]" in msg, msg


def test_broadcast_impossible_with_zero(mk):
    shapes = ((0, 3), (2, 3), (2, 3))
    msg = expect_fail(aclnn.ACLNN_ERR_PARAM_INVALID, tensors(mk, shapes=shapes))
    assert "[0, 3]" in msg or "[2, 3]" in msg, msg


@pytest.mark.parametrize(
    "shapes",
    [
        ((2, 3), (2, 3), (3, 2)),
        ((2, 1), (1, 3), (1, 3)),
        ((1, 3), (1, 3), (2, 3)),
        ((2, 3), (2, 3), (6,)),
        ((2, 3), (2, 3), (1, 2, 3)),
        ((0, 3), (0, 3), (1, 3)),
    ],
)
def test_broadcast_result_differs_from_gradinput(mk, shapes):
    args = tensors(mk, shapes=shapes)
    expect_fail(aclnn.ACLNN_ERR_PARAM_INVALID, args, "gradInput", shape_str(shapes[2]))


def test_rank_9_rejected(mk):
    nine = (1, 1, 2, 1, 1, 1, 1, 1, 1)
    msg = expect_fail(aclnn.ACLNN_ERR_PARAM_INVALID, tensors(mk, shapes=(nine,) * 3))
    assert rank_msg_ok(msg, nine), msg


@pytest.mark.parametrize("pos", range(3))
def test_rank_9_rejected_in_any_position(mk, pos):
    shapes = [(1,) * 8] * 3
    shapes[pos] = NINE
    expect_fail(aclnn.ACLNN_ERR_PARAM_INVALID, tensors(mk, shapes=shapes))


# ---------------------------------------------------------------------------- rule 4: approximate


@pytest.mark.parametrize("approximate", ["gelu", "", "TANH", "None", "None ", " none", "erf"])
def test_bad_approximate_value(mk, approximate):
    expect_fail(
        aclnn.ACLNN_ERR_PARAM_INVALID,
        tensors(mk),
        "approximate",
        repr(approximate),
        approximate=approximate,
    )


@pytest.mark.parametrize("approximate", [0, 1, 1.0, True, ["none"], b"none"])
def test_bad_approximate_type(mk, approximate):
    expect_fail(aclnn.ACLNN_ERR_PARAM_INVALID, tensors(mk), "approximate", approximate=approximate)


# ---------------------------------------------------------------------------- python types


@pytest.mark.parametrize("bad", [[1.0, 2.0], 1, "x", 1.5, np.ones(3, np.float32)])
@pytest.mark.parametrize("pos", range(3))
def test_wrong_python_type_in_tensor_position(mk, pos, bad):
    args = tensors(mk)
    args[pos] = bad
    expect_fail(aclnn.ACLNN_ERR_PARAM_INVALID, args, NAMES[pos])


@pytest.mark.parametrize("pos", range(3))
def test_destroyed_tensor(mk, pos):
    args = tensors(mk)
    mk.destroy(args[pos])
    expect_fail(aclnn.ACLNN_ERR_PARAM_INVALID, args, NAMES[pos])


# ---------------------------------------------------------------------------- order


def test_order_null_before_dtype(mk):
    args = tensors(mk, dtypes=("s32", "f32", "f32"))
    args[1] = None
    expect_fail(aclnn.ACLNN_ERR_PARAM_NULLPTR, args, "self")


def test_order_null_approximate_before_dtype_and_shape(mk):
    args = tensors(mk, dtypes=("f64", "s32", "f16"), shapes=((2, 3), (4, 3), NINE))
    expect_fail(aclnn.ACLNN_ERR_PARAM_NULLPTR, args, "approximate", approximate=None)


def test_order_null_tensor_before_bad_approximate(mk):
    args = tensors(mk)
    args[2] = None
    expect_fail(aclnn.ACLNN_ERR_PARAM_NULLPTR, args, "gradInput", approximate="gelu")


def test_order_dtype_before_broadcast(mk):
    args = tensors(mk, dtypes=("f32", "s32", "f32"), shapes=((2, 3), (4, 3), (5, 5)))
    expect_fail(
        aclnn.ACLNN_ERR_PARAM_INVALID, args, "self", "DT_INT32", absent=("[4, 3]", "[5, 5]")
    )


def test_order_output_dtype_mismatch_before_output_shape(mk):
    args = tensors(mk, dtypes=("f32", "f32", "f16"), shapes=((2, 3), (2, 3), (3, 2)))
    expect_fail(aclnn.ACLNN_ERR_PARAM_INVALID, args, "gradInput", "DT_FLOAT16", absent=("[3, 2]",))


def test_order_dtype_before_rank(mk):
    args = tensors(mk, dtypes=("f64", "f32", "f32"), shapes=(NINE,) * 3)
    expect_fail(aclnn.ACLNN_ERR_PARAM_INVALID, args, "gradOutput", "DT_DOUBLE")


def test_order_dtype_before_approximate(mk):
    args = tensors(mk, dtypes=("f32", "f32", "s32"))
    expect_fail(
        aclnn.ACLNN_ERR_PARAM_INVALID,
        args,
        "gradInput",
        "DT_INT32",
        absent=("approximate", "'gelu'"),
        approximate="gelu",
    )


def test_order_bf16_on_old_soc_before_approximate(mk, use_soc):
    use_soc("Ascend910")
    args = tensors(mk, dtypes=("bf16", "bf16", "bf16"))
    expect_fail(
        aclnn.ACLNN_ERR_PARAM_INVALID, args, "DT_BF16", absent=("'TANH'",), approximate="TANH"
    )


def test_order_broadcast_before_approximate(mk):
    args = tensors(mk, shapes=((2, 3), (4, 3), (2, 3)))
    msg = expect_fail(
        aclnn.ACLNN_ERR_PARAM_INVALID, args, absent=("approximate", "'gelu'"), approximate="gelu"
    )
    assert "[4, 3]" in msg or "[2, 3]" in msg, msg


def test_order_output_shape_before_approximate(mk):
    args = tensors(mk, shapes=((2, 3), (2, 3), (3, 2)))
    expect_fail(
        aclnn.ACLNN_ERR_PARAM_INVALID,
        args,
        "gradInput",
        "[3, 2]",
        absent=("approximate",),
        approximate="",
    )


def test_order_rank_before_approximate(mk):
    args = tensors(mk, shapes=(NINE,) * 3)
    msg = expect_fail(
        aclnn.ACLNN_ERR_PARAM_INVALID, args, absent=("approximate",), approximate="erf"
    )
    assert rank_msg_ok(msg, NINE), msg
