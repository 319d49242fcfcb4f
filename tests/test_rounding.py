"""The in-register float32 -> bfloat16 / HF32 / float16 roundings, bit for bit, against
independent NumPy/ml_dtypes references over every exponent, ties, NaN, Inf and overflow."""

import ml_dtypes
import numpy as np
import pytest

from aclnn.kernels.bits import f32_to_bf16, f32_to_half, round_to_hf32
from support import mapped

_to_bf16 = mapped(f32_to_bf16, np.uint16)
_to_hf32 = mapped(round_to_hf32)
_to_half = mapped(f32_to_half, np.uint16)


def _bit_patterns() -> np.ndarray:
    """Random patterns plus, for every exponent and sign, the ties and their neighbours at
    the bfloat16 (bit 16) and HF32 (bit 12) rounding points, and the specials."""
    rng = np.random.default_rng(7)
    random = rng.integers(0, 2**32, 1 << 18, dtype=np.uint64)
    exps = np.arange(256, dtype=np.uint64) << 23
    signs = np.array([0, 1 << 31], dtype=np.uint64)
    low = []
    for drop in (16, 12):
        half = 1 << (drop - 1)
        for kept_lsb in (0, 1 << drop):
            for delta in (-1, 0, 1):
                low.append(kept_lsb + half + delta)
    low += [0, 1, 0x7FFFFF, 0x400000]
    low = np.array(low, dtype=np.uint64)
    edges = (signs[:, None, None] | exps[None, :, None] | low[None, None, :]).ravel()
    return np.concatenate([random, edges]).astype(np.uint32)


BITS = _bit_patterns()
VALUES = BITS.view(np.float32)


def test_bfloat16_matches_ml_dtypes():
    ours = _to_bf16(VALUES)
    with np.errstate(invalid="ignore"):
        expected = VALUES.astype(ml_dtypes.bfloat16).view(np.uint16)
    nan = np.isnan(VALUES)
    np.testing.assert_array_equal(ours[~nan], expected[~nan])
    assert np.isnan(ours[nan].view(ml_dtypes.bfloat16).astype(np.float32)).all()


def _hf32_reference(bits: np.ndarray) -> np.ndarray:
    wide = bits.astype(np.uint64)
    rounded = ((wide + 0x7FF + ((wide >> 12) & 1)) >> 12) << 12
    return rounded.astype(np.uint32).view(np.float32)


def test_hf32_rounds_to_nearest_even():
    ours = _to_hf32(VALUES)
    nan = np.isnan(VALUES)
    np.testing.assert_array_equal(ours[~nan].view(np.uint32),
                                  _hf32_reference(BITS[~nan]).view(np.uint32))
    assert np.isnan(ours[nan]).all()
    assert (ours[~nan].view(np.uint32) & 0xFFF == 0).all()


@pytest.mark.parametrize("value, expected", [
    (np.float32(3.4028235e38), np.inf),        # past the largest HF32: rounds up to inf
    (np.float32(1.0) + np.float32(2**-12), 1.0),  # a tie, kept even
    (np.float32(1.0) + np.float32(3 * 2**-12), 1.0 + 2**-10),  # a tie, up to even
])
def test_hf32_edges(value, expected):
    assert _to_hf32(np.array([value], np.float32))[0] == expected


def test_float16_matches_numpy():
    ours = _to_half(VALUES)
    with np.errstate(over="ignore"):
        expected = VALUES.astype(np.float16).view(np.uint16)
    nan = np.isnan(VALUES)
    np.testing.assert_array_equal(ours[~nan], expected[~nan])
    assert np.isnan(ours[nan].view(np.float16)).all()
