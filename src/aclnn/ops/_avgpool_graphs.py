"""AvgPool2dBackward's graphs in the library contract, per SoC, as the op_api selects them
(pooling/avg_pool3_d_grad/op_api/aclnn_avgpool2d_backward.cpp, after CheckParams):

- global pooling, on every SoC first (IsGlobalAvgPool): divisorOverride 0, the kernel
  equal to self's H and W (both >= 10) and a 1 x 1 gradOutput. gradOutput divided by kH*kW
  (l0op::Div) in the compute dtype: FLOAT16 for cubeMathType 1 or 2, whatever the input
  dtype; otherwise FLOAT16 for FLOAT16 and FLOAT for FLOAT and BFLOAT16.
- Ascend950: AvgPoolV2Grad, a true float32 division by PyTorch's divisor, float32 sums,
  cubeMathType ignored.
- Ascend910/310P: the cube graph (BuildCubeGraph). Ascend910B/910_93: the cube graph when
  the divisor is in [-255, 255], kH, kW <= 255 with kH*kW <= 255 or both <= 20,
  countIncludePad, not ceilMode, self not a long strip (W/H < 2 and H/W < 2 in integers)
  and C < 65536; otherwise AvgPool3DGrad: gradOutput times the float32 reciprocal of
  PyTorch's divisor, float32 sums, cubeMathType ignored.
- The cube graph: a depthwise transposed convolution of gradOutput (times a mean matrix of
  float32(1/count of the window's cells inside the input) when countIncludePad is false
  and the divisor is 0 or +-255) with kernel weights float32(1/divisor), float32(1/(kH*kW))
  (countIncludePad: every window, one cut by ceilMode too) or 1 (with the mean matrix).
  cubeMathType 1 and 2 cast both to FLOAT16 (and the result is FLOAT16), 3 rounds them to
  HF32 on Ascend910B/910_93; a FLOAT16 graph computes its mean matrix and Mul in FLOAT16.
  The cube's own accumulation is not public: float32 sums are assumed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..dtypes import ITEMSIZE, NUMPY_DTYPE
from ..dtypes import aclDataType as D
from ..framework.workspace import Graph
from ..kernels import pool
from ..tensor import aclTensor
from . import _l0

GLOBAL_MIN_SIZE = 10  # kAvgpoolMinH / kAvgpoolMinW
CUBE_DIVISOR_LIMIT = 255
CUBE_KERNEL_LIMIT, CUBE_KERNEL_AREA, CUBE_KERNEL_SIDE = 255, 255, 20
CUBE_CHANNELS = 65536
KERNEL_SCRATCH = 16 << 20  # AvgPoolV2Grad and AvgPool3DGrad tiling workspaces
FP16_DOWN = (1, 2)  # ALLOW_FP32_DOWN_PRECISION, USE_FP16
USE_HF32 = 3


@dataclass(frozen=True)
class Window:
    """The pooling parameters (after defaults), as the graphs need them."""

    kernel: tuple[int, int]
    stride: tuple[int, int]
    padding: tuple[int, int]
    ceil_mode: bool
    count_include_pad: bool
    divisor: int
    cube_math_type: int


def int32(value: int) -> int:
    """`value` as the C int the l0 ops take (two's complement truncation)."""
    return (value + 2**31) % 2**32 - 2**31


def is_global(window: Window, dims: tuple[int, ...]) -> bool:
    """IsGlobalAvgPool: the kernel covers self's H x W (both >= 10), gradOutput is 1 x 1 and
    no divisor is given; stride, padding, ceilMode and countIncludePad do not matter."""
    _, _, h, w, out_h, out_w = dims
    return (window.divisor == 0 and window.kernel == (h, w) and h >= GLOBAL_MIN_SIZE
            and w >= GLOBAL_MIN_SIZE and (out_h, out_w) == (1, 1))


def cube_divisor_in_range(divisor: int) -> bool:
    """CheckCubeSupport's divisor rule (inclusive)."""
    return -CUBE_DIVISOR_LIMIT <= divisor <= CUBE_DIVISOR_LIMIT


def cube_on_910b(window: Window, dims: tuple[int, ...]) -> bool:
    """Whether Ascend910B/910_93 take the cube graph (else AvgPool3DGrad)."""
    _, c, h, w, _, _ = dims
    k_h, k_w = window.kernel
    kernel_ok = (k_h <= CUBE_KERNEL_LIMIT and k_w <= CUBE_KERNEL_LIMIT
                 and (k_h * k_w <= CUBE_KERNEL_AREA
                      or (k_h <= CUBE_KERNEL_SIDE and k_w <= CUBE_KERNEL_SIDE)))
    long_strip = h == 0 or w == 0 or w // h >= 2 or h // w >= 2
    return (cube_divisor_in_range(window.divisor) and kernel_ok and window.count_include_pad
            and not window.ceil_mode and not long_strip and c < CUBE_CHANNELS)


def _half(value: float) -> float:
    return float(np.float16(value))


def uses_mean_matrix(window: Window) -> bool:
    """The cube graph multiplies by a mean matrix (isNoNeedMul false): countIncludePad is
    false and the divisor is 0 or +-255 (the strict limits ignore +-255 there)."""
    divisor = window.divisor
    in_range = -CUBE_DIVISOR_LIMIT < divisor < CUBE_DIVISOR_LIMIT and divisor != 0
    return not (in_range or window.count_include_pad)


def cube_in_float16(window: Window, dtype: int) -> bool:
    """The cube graph runs in FLOAT16: a FLOAT16 input, or cubeMathType 1 or 2."""
    return dtype == D.ACL_FLOAT16 or window.cube_math_type in FP16_DOWN


def cube_scaling(window: Window, dtype: int, soc_name: str) -> tuple[pool.Scaling, tuple]:
    """The cube graph's numerics as a kernel `Scaling`, and the (countIncludePad, override)
    that make the kernel's per-window factors: the exclusive counts for the mean matrix,
    1 otherwise."""
    divisor, k_h, k_w = window.divisor, *window.kernel
    if uses_mean_matrix(window):
        weight, factors = 1.0, (False, 0)
    else:
        weight = float(np.float32(1) / np.float32(divisor if divisor != 0 else k_h * k_w))
        factors = (False, 1)
    half = cube_in_float16(window, dtype)
    hf32 = (not half and window.cube_math_type == USE_HF32
            and soc_name in ("Ascend910B", "Ascend910_93"))
    if half:
        weight, rounding = _half(weight), pool.ROUND_FP16
    elif hf32:
        weight, rounding = float(np.float32(_hf32(weight))), pool.ROUND_HF32
    else:
        rounding = pool.EXACT
    scaling = pool.Scaling(divide=False, half_mean=dtype == D.ACL_FLOAT16, rounding=rounding,
                           weight=weight, half_out=half)
    return scaling, factors


def _hf32(value: float) -> float:
    """float32 `value` rounded to HF32 (11 explicit mantissa bits, nearest even)."""
    bits = int(np.float32(value).view(np.uint32))
    bits = (bits + 0x7FF + ((bits >> 12) & 1)) & ~0xFFF
    return float(np.uint32(bits & 0xFFFFFFFF).view(np.float32))


def global_compute_dtype(dtype: int, cube_math_type: int) -> int:
    """The dtype the global graph divides in."""
    if cube_math_type in FP16_DOWN or dtype == D.ACL_FLOAT16:
        return D.ACL_FLOAT16
    return D.ACL_FLOAT


def global_step(grad_output: aclTensor, grad_input: aclTensor, window: Window):
    """The global graph's work: every cell of a plane gets the plane's gradient divided by
    kH*kW in the compute dtype, then cast to gradInput's dtype."""
    compute = NUMPY_DTYPE[global_compute_dtype(grad_output.dtype, window.cube_math_type)]
    area = compute.type(window.kernel[0] * window.kernel[1])

    def run() -> None:
        grad = grad_output.numpy_view().astype(compute)
        out = grad_input.numpy_view()
        out[...] = np.broadcast_to(grad / area, out.shape).astype(out.dtype)

    return run


def _nbytes(shape, dtype: int) -> int:
    return math.prod(shape) * ITEMSIZE[dtype]


def global_workspace(grad_output: aclTensor, grad_input: aclTensor, window: Window,
                     dims: tuple[int, ...]) -> int:
    """Contiguous, Cast to the compute dtype, the kH x kW matrix, Div, Cast to gradInput's."""
    n, c, h, w, _, _ = dims
    compute = global_compute_dtype(grad_output.dtype, window.cube_math_type)
    graph = Graph()
    g = _l0.cast(graph, _l0.contiguous(graph, _l0.user(grad_output)), compute)
    (matrix,) = graph.kernel([], [_nbytes(window.kernel, compute)])
    (out,) = graph.kernel([g.id, matrix], [_nbytes((n, c, h, w), compute)])
    quotient = _l0.Value(out, (n, c, h, w), compute, True)
    _l0.view_copy(graph, _l0.cast(graph, quotient, grad_input.dtype), grad_input)
    return graph.size()


def v2_workspace(grad_output: aclTensor, self: aclTensor, grad_input: aclTensor,
                 dims: tuple[int, ...]) -> int:
    """Ascend950: Contiguous of gradOutput and self, AvgPoolV2Grad (16 MiB of its own)."""
    graph = Graph()
    g = _l0.contiguous(graph, _l0.user(grad_output))
    _l0.contiguous(graph, _l0.user(self))
    n, c, h, w, _, _ = dims
    out = _l0.compute(graph, [g], (n, c, h, w), grad_output.dtype, KERNEL_SCRATCH)
    _l0.view_copy(graph, out, grad_input)
    return graph.size()


def pool3d_workspace(grad_output: aclTensor, self: aclTensor, grad_input: aclTensor,
                     dims: tuple[int, ...]) -> int:
    """Ascend910B/910_93 AvgPool3DGrad graph: Contiguous, Transpose to NDHWC, the kernel
    (16 MiB of its own, plus a float32 N*C*H*W buffer for FLOAT16/BFLOAT16), Transpose back."""
    n, c, h, w, out_h, out_w = dims
    dtype = grad_output.dtype
    graph = Graph()
    g = _l0.contiguous(graph, _l0.user(grad_output))
    _l0.contiguous(graph, _l0.user(self))
    g = _l0.compute(graph, [g], (out_h, out_w, n * c), dtype)
    scratch = KERNEL_SCRATCH + (n * c * h * w * 4 if dtype != D.ACL_FLOAT else 0)
    pooled = _l0.compute(graph, [g], (h, w, n * c), dtype, scratch)
    _l0.view_copy(graph, _l0.compute(graph, [pooled], (n, c, h, w), dtype), grad_input)
    return graph.size()


def _nc1hwc0(shape, dtype: int) -> tuple[int, ...]:
    """The 5-D fractal layout's shape (C0 = 16 for FLOAT16, 8 for FLOAT: the usual sizes;
    TransData is not public)."""
    n, c, h, w = shape
    c0 = 16 if dtype == D.ACL_FLOAT16 else 8
    return (n, -(-c // c0), h, w, c0)


def cube_workspace(grad_output: aclTensor, self: aclTensor, grad_input: aclTensor,
                   window: Window, dims: tuple[int, ...]) -> int:
    """BuildCubeGraph's intermediates, with the fractal layouts' sizes as usual (TransData,
    the convolution's own workspace and the optional Dilation are not public)."""
    n, c, h, w, out_h, out_w = dims
    k_h, k_w = window.kernel
    graph = Graph()
    g = _l0.contiguous(graph, _l0.user(grad_output))
    x = _l0.contiguous(graph, _l0.user(self))
    if D.ACL_BF16 in (grad_output.dtype, self.dtype):
        g, x = _l0.cast(graph, g, D.ACL_FLOAT), _l0.cast(graph, x, D.ACL_FLOAT)
    g = _l0.Value(g.id, (n, c, out_h, out_w), g.dtype, True)
    x = _l0.Value(x.id, (n, c, h, w), x.dtype, True)
    if uses_mean_matrix(window):  # the mean matrix, copied to the device, and the Mul
        (mean,) = graph.kernel([], [_nbytes(g.shape, g.dtype)])
        (product,) = graph.kernel([g.id, mean], [_nbytes(g.shape, g.dtype)])
        g = _l0.Value(product, g.shape, g.dtype, True)
    conv_dtype = D.ACL_FLOAT16 if cube_in_float16(window, grad_output.dtype) else g.dtype
    g, x = _l0.cast(graph, g, conv_dtype), _l0.cast(graph, x, conv_dtype)
    g5 = _l0.compute(graph, [g], _nc1hwc0(g.shape, conv_dtype), conv_dtype)
    x5 = _l0.compute(graph, [x], _nc1hwc0(x.shape, conv_dtype), conv_dtype)
    weight_dtype = D.ACL_FLOAT16 if grad_output.dtype == D.ACL_FLOAT16 else D.ACL_FLOAT
    (weights,) = graph.kernel([], [_nbytes((c, 1, k_h, k_w), weight_dtype)])
    weights_v = _l0.cast(graph, _l0.Value(weights, (c, 1, k_h, k_w), weight_dtype, True),
                         conv_dtype)
    c0 = _nc1hwc0((1, c, 1, 1), conv_dtype)[-1]
    fractal = _l0.compute(graph, [weights_v], (-(-c // c0) * k_h * k_w, 16, c0), conv_dtype)
    conv = _l0.compute(graph, [g5, x5, fractal], _nc1hwc0((n, c, h, w), conv_dtype), conv_dtype)
    nchw = _l0.compute(graph, [conv], (n, c, h, w), conv_dtype)
    _l0.view_copy(graph, _l0.cast(graph, nchw, grad_input.dtype), grad_input)
    return graph.size()


def library_rounding(window: Window, dims: tuple[int, ...], dtype: int, soc_name: str) -> int:
    """How the graph the library runs rounds the scaled gradient of a FLOAT or BFLOAT16
    input (pool.EXACT, ROUND_FP16 or ROUND_HF32): the rounding step of the golden."""
    if dtype == D.ACL_FLOAT16:
        return pool.EXACT
    if is_global(window, dims):
        fp16 = global_compute_dtype(dtype, window.cube_math_type) == D.ACL_FLOAT16
        return pool.ROUND_FP16 if fp16 else pool.EXACT
    if soc_name == "Ascend950" or (soc_name in ("Ascend910B", "Ascend910_93")
                                   and not cube_on_910b(window, dims)):
        return pool.EXACT
    return cube_scaling(window, dtype, soc_name)[0].rounding
