"""Op framework helpers: dtype promotion (SPEC §5) and broadcast inference (SPEC §6)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

import aclnn
from aclnn.framework.broadcast import broadcast_shapes
from aclnn.framework.promotion import promote_types

TORCH_OF = {
    aclnn.ACL_FLOAT: torch.float32,
    aclnn.ACL_FLOAT16: torch.float16,
    aclnn.ACL_DOUBLE: torch.float64,
    aclnn.ACL_BF16: torch.bfloat16,
    aclnn.ACL_INT8: torch.int8,
    aclnn.ACL_UINT8: torch.uint8,
    aclnn.ACL_INT16: torch.int16,
    aclnn.ACL_INT32: torch.int32,
    aclnn.ACL_INT64: torch.int64,
    aclnn.ACL_BOOL: torch.bool,
    aclnn.ACL_COMPLEX32: torch.complex32,
    aclnn.ACL_COMPLEX64: torch.complex64,
    aclnn.ACL_COMPLEX128: torch.complex128,
}
ACL_OF = {v: k for k, v in TORCH_OF.items()}
UNSIGNED = [aclnn.ACL_UINT16, aclnn.ACL_UINT32, aclnn.ACL_UINT64]
ALL = list(TORCH_OF) + UNSIGNED
NAME = {
    aclnn.ACL_FLOAT: "f32",
    aclnn.ACL_FLOAT16: "f16",
    aclnn.ACL_DOUBLE: "f64",
    aclnn.ACL_BF16: "bf16",
    aclnn.ACL_INT8: "s8",
    aclnn.ACL_UINT8: "u8",
    aclnn.ACL_INT16: "s16",
    aclnn.ACL_INT32: "s32",
    aclnn.ACL_INT64: "s64",
    aclnn.ACL_BOOL: "bool",
    aclnn.ACL_COMPLEX32: "c32",
    aclnn.ACL_COMPLEX64: "c64",
    aclnn.ACL_COMPLEX128: "c128",
    aclnn.ACL_UINT16: "u16",
    aclnn.ACL_UINT32: "u32",
    aclnn.ACL_UINT64: "u64",
}


def _pair_ids(pairs):
    return [f"{NAME[a]}-{NAME[b]}" for a, b in pairs]


PAIRS = list(itertools.product(TORCH_OF, TORCH_OF))
UNSIGNED_PAIRS = [(u, x) for u in UNSIGNED for x in ALL] + [(x, u) for u in UNSIGNED for x in ALL]


# ---------------------------------------------------------------------------- promotion


@pytest.mark.parametrize("a, b", PAIRS, ids=_pair_ids(PAIRS))
def test_promotion_matches_torch(a, b):
    expected = ACL_OF[torch.promote_types(TORCH_OF[a], TORCH_OF[b])]
    assert promote_types(a, b) == expected


@pytest.mark.parametrize("a, b", UNSIGNED_PAIRS, ids=_pair_ids(UNSIGNED_PAIRS))
def test_unsigned_promote_only_with_themselves(a, b):
    # SPEC §5: u16/u32/u64 promote only with themselves (stricter than torch 2.13, which
    # promotes them with floating types).
    expected = a if a == b else None
    assert promote_types(a, b) == expected


def test_promotion_spot_checks():
    assert promote_types(aclnn.ACL_FLOAT16, aclnn.ACL_BF16) == aclnn.ACL_FLOAT
    assert promote_types(aclnn.ACL_BF16, aclnn.ACL_INT64) == aclnn.ACL_BF16
    assert promote_types(aclnn.ACL_INT8, aclnn.ACL_BF16) == aclnn.ACL_BF16
    assert promote_types(aclnn.ACL_BOOL, aclnn.ACL_FLOAT16) == aclnn.ACL_FLOAT16
    assert promote_types(aclnn.ACL_BOOL, aclnn.ACL_BOOL) == aclnn.ACL_BOOL
    assert promote_types(aclnn.ACL_UINT8, aclnn.ACL_INT8) == aclnn.ACL_INT16
    assert promote_types(aclnn.ACL_INT32, aclnn.ACL_FLOAT16) == aclnn.ACL_FLOAT16
    assert promote_types(aclnn.ACL_FLOAT, aclnn.ACL_COMPLEX32) == aclnn.ACL_COMPLEX64
    assert promote_types(aclnn.ACL_UINT16, aclnn.ACL_FLOAT) is None


def test_three_way_promotion_left_to_right_is_torch():
    for a, b, c in itertools.product(TORCH_OF, repeat=3):
        expected = torch.promote_types(torch.promote_types(TORCH_OF[a], TORCH_OF[b]), TORCH_OF[c])
        assert promote_types(promote_types(a, b), c) == ACL_OF[expected], (a, b, c)


def test_promotion_is_symmetric():
    for a, b in itertools.product(ALL, ALL):
        assert promote_types(a, b) == promote_types(b, a), (NAME[a], NAME[b])


# ---------------------------------------------------------------------------- broadcast


def _numpy_broadcast(*shapes):
    try:
        return tuple(np.broadcast_shapes(*shapes))
    except ValueError:
        return None


def _ours(*shapes):
    result = broadcast_shapes(*shapes)
    return None if result is None else tuple(result)


@pytest.mark.parametrize(
    "a, b, expected",
    [
        ((2, 1), (1, 3), (2, 3)),
        ((3,), (2, 3), (2, 3)),
        ((), (2, 3), (2, 3)),
        ((), (), ()),
        ((0,), (1,), (0,)),
        ((1,), (0,), (0,)),
        ((0, 3), (1, 3), (0, 3)),
        ((2, 0), (2, 1), (2, 0)),
        ((0,), (2,), None),
        ((2, 3), (4, 3), None),
        ((2, 3), (3, 2), None),
        ((5, 1, 4), (3, 1), (5, 3, 4)),
        ((1,) * 8, (2,), (1,) * 7 + (2,)),
        ((1,) * 9, (3,), (1,) * 8 + (3,)),
    ],
)
def test_broadcast_cases(a, b, expected):
    assert _ours(a, b) == expected
    assert _ours(b, a) == expected


def test_broadcast_result_is_a_tuple():
    result = broadcast_shapes((2, 1), (1, 3))
    assert isinstance(result, tuple)
    assert result == (2, 3)


def test_broadcast_three_shapes():
    assert _ours((2, 1, 1), (1, 3, 1), (4,)) == (2, 3, 4)
    assert _ours((2, 1), (1, 3), (4,)) is None
    assert _ours((0, 1), (1, 3), (1,)) == (0, 3)


_dim = st.sampled_from([0, 1, 1, 2, 3])
_shape = st.lists(_dim, min_size=0, max_size=5).map(tuple)


@given(_shape, _shape)
def test_broadcast_matches_numpy(a, b):
    assert _ours(a, b) == _numpy_broadcast(a, b)


@given(_shape, _shape, _shape)
def test_broadcast_three_matches_numpy(a, b, c):
    assert _ours(a, b, c) == _numpy_broadcast(a, b, c)
