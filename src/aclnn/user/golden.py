"""Golden outputs: each operator's math in float64 on the exact input values (SPEC §10).

AvgPool2dBackward's documented cubeMathType step - the float32 quotient gradOutput/divisor
rounded to float16 or HF32 before accumulating - is part of its math and is applied;
everything else is float64.
"""

from __future__ import annotations

import math

import numba
import numpy as np

_MEAN = 1


@numba.vectorize(["float64(float64)"], cache=True)
def erf(x):
    """math.erf elementwise, compiled (the C library's erf, as math.erf uses)."""
    return math.erf(x)


def _f64(array) -> np.ndarray:
    return np.asarray(array, dtype=np.float64)


def smooth_l1_loss_backward(grad, x, target, reduction: int, beta: float,
                            count: int | None = None) -> np.ndarray:
    """grad * (d / beta if |d| < beta else sign(d)), d = x - target (np.sign: sign(0) = 0,
    sign(NaN) = NaN); mean divides by x's own element count (`count` when these are rows
    of a larger call)."""
    with np.errstate(invalid="ignore", divide="ignore"):
        d = _f64(x) - _f64(target)
        slope = np.where(np.abs(d) < beta, d / beta if beta > 0 else 0.0, np.sign(d))
        result = _f64(grad) * slope
    if reduction != _MEAN:
        return result
    return result / (np.asarray(x).size if count is None else count)


def l1_loss_backward(grad, x, target, reduction: int, count: int | None = None) -> np.ndarray:
    """grad * sign(x - target); mean divides by the broadcast element count (`count` when
    these are rows of a larger call)."""
    with np.errstate(invalid="ignore"):
        result = _f64(grad) * np.sign(_f64(x) - _f64(target))
    if reduction != _MEAN:
        return result
    return result / (result.size if count is None else count)


def gelu_backward(grad, x, approximate: str) -> np.ndarray:
    """grad * GELU'(x): Phi(x) + x phi(x) (erf form), or the tanh form evaluated through
    sigmoids (1/2 (1 + tanh u) = s(2u), 1 - tanh(u)**2 = 4 s(2u) s(-2u))."""
    x = _f64(x)
    with np.errstate(over="ignore", invalid="ignore"):
        if approximate == "tanh":
            k, c = math.sqrt(2 / math.pi), 0.044715
            u = k * (x + c * x**3)
            s, s_neg = 1 / (1 + np.exp(-2 * u)), 1 / (1 + np.exp(2 * u))
            derivative = s + 2 * x * s * s_neg * k * (1 + 3 * c * x * x)
        else:
            cdf = 0.5 * (1 + erf(x / math.sqrt(2)))
            derivative = cdf + x * np.exp(-0.5 * x * x) / math.sqrt(2 * math.pi)
        return _f64(grad) * derivative


def _pool_axis(out_size, in_size, kernel, stride, pad, count_include_pad):
    """Per output index: the window's start in padded coordinates and its divisor factor."""
    start = np.arange(out_size) * stride - pad
    end = np.minimum(start + kernel, in_size + pad)
    clipped = np.minimum(end, in_size) - np.maximum(start, 0)
    return start + pad, (end - start) if count_include_pad else clipped


def _round_hf32(values: np.ndarray) -> np.ndarray:
    """float32 values rounded to 11 explicit mantissa bits, nearest-even (NaN kept)."""
    bits = values.astype(np.float32).view(np.uint32).astype(np.uint64)
    rounded = ((bits + 0x7FF + ((bits >> 12) & 1)) >> 12) << 12
    result = rounded.astype(np.uint32).view(np.float32)
    return np.where(np.isnan(values), values, result)


def _scaled(grad: np.ndarray, divisor: np.ndarray, rounding: str) -> np.ndarray:
    """gradOutput / divisor: float64, or for a cube rounding the float32 quotient rounded
    to float16 ("fp16") or HF32 ("hf32")."""
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        if rounding == "exact":
            return grad / divisor
        quotient = grad.astype(np.float32) / divisor.astype(np.float32)
        rounded = quotient.astype(np.float16) if rounding == "fp16" else _round_hf32(quotient)
        return rounded.astype(np.float64)


def avg_pool2d_backward(grad, x_shape, kernel, stride, padding, count_include_pad,
                        divisor_override, rounding: str = "exact") -> np.ndarray:
    """Each gradOutput cell divided by its window's divisor (then rounded per `rounding`:
    "exact", "fp16" or "hf32"), added to every input cell of its window (windows clipped
    to the input); kernel/stride/padding are (h, w) pairs."""
    grad = _f64(grad)
    out_h, out_w = grad.shape[-2:]
    height, width = x_shape[-2:]
    h_start, h_factor = _pool_axis(out_h, height, kernel[0], stride[0], padding[0],
                                   count_include_pad)
    w_start, w_factor = _pool_axis(out_w, width, kernel[1], stride[1], padding[1],
                                   count_include_pad)
    divisor = (np.full((out_h, out_w), float(divisor_override)) if divisor_override
               else np.outer(h_factor, w_factor).astype(np.float64))
    scaled = _scaled(grad, divisor, rounding)
    rows = max(height + 2 * padding[0], h_start[-1] + kernel[0] if out_h else 0)
    cols = max(width + 2 * padding[1], w_start[-1] + kernel[1] if out_w else 0)
    padded = np.zeros((*grad.shape[:-2], rows, cols))
    for kh in range(kernel[0]):
        for kw in range(kernel[1]):
            padded[..., h_start[:, None] + kh, w_start[None, :] + kw] += scaled
    return padded[..., padding[0]: padding[0] + height, padding[1]: padding[1] + width]
