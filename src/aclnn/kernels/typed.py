"""Element access by array type, for kernels that take typed views instead of raw bytes.

float32 data is a float32 array, float16 data a uint16 array and bfloat16 data an int16
array (views of the same bytes), so the array's type alone selects the conversion at
compile time: `widen(v)` gives float32, `a[i] = narrow(v, a)` stores float32 `v` rounded
to the array's element type (round-to-nearest-even), and `element_code(a)` is the element
code of the array's type.
"""

from __future__ import annotations

import numpy as np
from numba import types
from numba.extending import overload

from .bits import BF16, F16, F32, bf16_to_f32, f32_to_bf16, f32_to_half, half_to_f32

VIEW_DTYPE = {F32: np.dtype(np.float32), F16: np.dtype(np.uint16), BF16: np.dtype(np.int16)}


def widen(value):
    """float32 of one element read from a typed view (compiled code only)."""
    raise NotImplementedError


def narrow(value, array):
    """float32 `value` as an element of `array`'s type (compiled code only)."""
    raise NotImplementedError


def element_code(array):
    """The element code (bits.F32, F16 or BF16) of a typed view, a constant of its type
    (compiled code only)."""
    raise NotImplementedError


@overload(widen, inline="always")
def _widen(value):
    if value == types.float32:
        return lambda value: value
    if value == types.uint16:
        return lambda value: half_to_f32(value)
    if value == types.int16:
        return lambda value: bf16_to_f32(np.uint16(value))
    return None


@overload(narrow, inline="always")
def _narrow(value, array):
    element = array.dtype
    if element == types.float32:
        return lambda value, array: value
    if element == types.uint16:
        return lambda value, array: f32_to_half(value)
    if element == types.int16:
        return lambda value, array: np.int16(f32_to_bf16(value))
    return None


@overload(element_code, inline="always")
def _element_code(array):
    code = {types.float32: F32, types.uint16: F16, types.int16: BF16}.get(array.dtype)
    if code is None:
        return None
    return lambda array: code
