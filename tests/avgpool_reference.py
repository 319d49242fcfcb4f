"""Independent float64 reference for aclnnAvgPool2dBackward (SPEC §8) and its bars (SPEC §10).

Shares no code with `aclnn`. The numeric part is a naive loop over output cells:

- pooled size per axis: ``(in + 2p - k) / s + 1``, floored or ceiled (ceilMode); with
  ceilMode, if ``(out - 1) * s >= in + p`` the last window is dropped;
- window of output cell o: ``start = o*s - p``, ``end = min(start + k, in + p)``,
  ``pool = prod(end - start)``; the window is clipped to ``[0, in)``;
- ``divisor = divisorOverride`` if it is not 0, else ``pool`` if countIncludePad, else the
  clipped window's size;
- every input cell of the clipped window receives ``gradOutput / divisor``.

cubeMathType model for FLOAT inputs (SPEC §8): each term is first the correctly rounded
float32 quotient ``g / divisor``; USE_FP16 (and ALLOW_FP32_DOWN_PRECISION on Ascend910 /
Ascend310P) rounds it to float16, USE_HF32 (and ALLOW_FP32_DOWN_PRECISION on Ascend910B /
Ascend910_93 / Ascend950) rounds it to HF32 (float32 range, 11 explicit mantissa bits, RNE);
KEEP_DTYPE keeps the exact quotient. The rounded terms are then accumulated (here exactly,
in float64; the device accumulates in float32, which the §10 bound allows for).

Bars (SPEC §10): float32 within ``4 ULP + 2**-23 * sum|terms|`` of the float64 result;
float16 / bfloat16 within 1 ULP of the output dtype (plus the float32-compute allowance
``2**-23 * sum|terms|``, which only matters under cancellation, see `assert_avgpool_close`).

The second half holds small device helpers (built on `tests/support.py`) for the test
modules; they import `aclnn` lazily so the numeric part stays standalone.
"""

from __future__ import annotations

from collections.abc import Sequence

import ml_dtypes
import numpy as np

F32 = np.dtype(np.float32)
F16 = np.dtype(np.float16)
BF16 = np.dtype(ml_dtypes.bfloat16)

KEEP_DTYPE, ALLOW_FP32_DOWN_PRECISION, USE_FP16, USE_HF32 = 0, 1, 2, 3
FP16_DOWN_SOCS = ("Ascend910", "Ascend310P")
HF32_DOWN_SOCS = ("Ascend910B", "Ascend910_93", "Ascend950")
ALL_SOCS = FP16_DOWN_SOCS + HF32_DOWN_SOCS

#: explicit mantissa bits and minimum normal exponent of each output dtype.
_FORMAT = {F32: (23, -126), F16: (10, -14), BF16: (7, -126)}


# --------------------------------------------------------------------------- geometry


def pair(values: Sequence[int] | None, default: tuple[int, int] | None = None) -> tuple[int, int]:
    """(H, W) of an int-array attribute of length 1 or 2 (length 0 / None -> `default`)."""
    values = [] if values is None else [int(v) for v in values]
    if len(values) == 0:
        assert default is not None
        return default
    if len(values) == 1:
        return values[0], values[0]
    assert len(values) == 2, values
    return values[0], values[1]


def pooled_size(size: int, kernel: int, stride: int, pad: int, ceil_mode: bool) -> int:
    """The forward pooling's output length along one axis (may be <= 0 for tiny inputs)."""
    span = size + 2 * pad - kernel
    if ceil_mode:
        out = -((-span) // stride) + 1
        if (out - 1) * stride >= size + pad:
            out -= 1
    else:
        out = span // stride + 1
    return out


def pooled_shape(input_shape, kernel, stride, padding, ceil_mode) -> tuple[int, ...]:
    """gradOutput's shape for `input_shape` ((N, C, H, W) or (C, H, W))."""
    k_h, k_w = pair(kernel)
    s_h, s_w = pair(stride, (k_h, k_w))
    p_h, p_w = pair(padding)
    *lead, h, w = input_shape
    return (*lead, pooled_size(h, k_h, s_h, p_h, ceil_mode),
            pooled_size(w, k_w, s_w, p_w, ceil_mode))


# --------------------------------------------------------------------------- term rounding


def widen(a) -> np.ndarray:
    """The exact float64 value of every element of `a` (float32 / float16 / bfloat16)."""
    a = np.asarray(a)
    if a.dtype == BF16:
        a = a.astype(np.float32)  # exact
    return a.astype(np.float64)


def round_hf32(x) -> np.ndarray:
    """Round float32 values to HF32: float32 range, 11 explicit mantissa bits, RNE.

    Works on the bit pattern: the 12 low mantissa bits are rounded away, ties to even
    (a carry into the exponent is the correct rounding up; overflow gives inf).
    """
    x = np.asarray(x, dtype=np.float32)
    b = x.view(np.uint32).astype(np.uint64)
    finite = np.isfinite(x)
    lsb = (b >> np.uint64(12)) & np.uint64(1)
    r = (b + np.uint64(0x7FF) + lsb) & np.uint64(0xFFFFF000)
    r = np.where(finite, r, b).astype(np.uint32)
    return r.view(np.float32)


def round_fp16(x) -> np.ndarray:
    """Round float32 values to float16 (RNE; NumPy's float32 -> float16 cast is exact RNE)."""
    return np.asarray(x, dtype=np.float32).astype(np.float16)


def term_mode(dtype, cube_math_type: int, soc: str) -> str:
    """'exact', 'fp16' or 'hf32': how each scaled gradient is rounded (SPEC §8)."""
    if np.dtype(dtype) != F32 or cube_math_type == KEEP_DTYPE:
        return "exact"
    if cube_math_type == USE_FP16:
        return "fp16"
    if cube_math_type == USE_HF32:
        return "hf32"
    assert cube_math_type == ALLOW_FP32_DOWN_PRECISION
    assert soc in ALL_SOCS, soc
    return "fp16" if soc in FP16_DOWN_SOCS else "hf32"


def scaled_terms(g, divisor: int, mode: str) -> np.ndarray:
    """The float64 value of g / divisor as the device adds it, under `mode`."""
    g = np.asarray(g)
    if mode == "exact":
        return widen(g) / float(divisor)
    # The correctly rounded float32 quotient (IEEE float32 division), then rounded.
    q = np.asarray(g, dtype=np.float32) / np.float32(divisor)
    if mode == "fp16":
        return round_fp16(q).astype(np.float64)
    if mode == "hf32":
        return round_hf32(q).astype(np.float64)
    raise ValueError(mode)


# --------------------------------------------------------------------------- reference


def avg_pool2d_backward_ref(
    grad_output,
    input_shape: Sequence[int],
    kernel: Sequence[int],
    stride: Sequence[int] | None,
    padding: Sequence[int],
    ceil_mode: bool,
    count_include_pad: bool,
    divisor_override: int,
    mode: str = "exact",
) -> tuple[np.ndarray, np.ndarray]:
    """(result, sum_abs): float64 gradInput of `input_shape` and sum |term| per cell.

    `grad_output` holds the values exactly as stored (any float dtype); it is (N, C, Ho, Wo)
    or (C, Ho, Wo) and must have the pooled shape. `stride` of length 0 or None means the
    kernel. `mode` is the term rounding ('exact', 'fp16', 'hf32'; see `term_mode`).
    """
    g = np.asarray(grad_output)
    three_d = len(input_shape) == 3
    shape4 = (1, *input_shape) if three_d else tuple(input_shape)
    if three_d:
        g = g.reshape(1, *g.shape)
    n, c, in_h, in_w = shape4
    k_h, k_w = pair(kernel)
    s_h, s_w = pair(stride, (k_h, k_w))
    p_h, p_w = pair(padding)
    out_h = pooled_size(in_h, k_h, s_h, p_h, ceil_mode)
    out_w = pooled_size(in_w, k_w, s_w, p_w, ceil_mode)
    assert g.shape == (n, c, out_h, out_w), (g.shape, (n, c, out_h, out_w))
    result = np.zeros(shape4, dtype=np.float64)
    sum_abs = np.zeros(shape4, dtype=np.float64)
    for oh in range(out_h):
        h0 = oh * s_h - p_h
        h1 = min(h0 + k_h, in_h + p_h)
        for ow in range(out_w):
            w0 = ow * s_w - p_w
            w1 = min(w0 + k_w, in_w + p_w)
            pool = (h1 - h0) * (w1 - w0)
            ch0, ch1 = max(h0, 0), min(h1, in_h)
            cw0, cw1 = max(w0, 0), min(w1, in_w)
            if ch1 <= ch0 or cw1 <= cw0:
                continue
            if divisor_override != 0:
                divisor = divisor_override
            elif count_include_pad:
                divisor = pool
            else:
                divisor = (ch1 - ch0) * (cw1 - cw0)
            with np.errstate(invalid="ignore", over="ignore"):  # NaN / inf gradients
                term = scaled_terms(g[:, :, oh, ow], divisor, mode)[:, :, None, None]
                result[:, :, ch0:ch1, cw0:cw1] += term
                sum_abs[:, :, ch0:ch1, cw0:cw1] += np.abs(term)
    if three_d:
        result, sum_abs = result[0], sum_abs[0]
    return result, sum_abs


# --------------------------------------------------------------------------- bars


def ulp(values, dtype) -> np.ndarray:
    """Spacing of `dtype` at |values| (subnormal spacing below the normal range and at 0)."""
    mbits, emin = _FORMAT[np.dtype(dtype)]
    v = np.abs(np.asarray(values, dtype=np.float64))
    _, e = np.frexp(v)
    e = np.where(v == 0, emin, e - 1)
    e = np.maximum(e, emin)
    return np.ldexp(1.0, (e - mbits).astype(np.int64))


def tolerance(golden, sum_abs, dtype) -> np.ndarray:
    """The per-element bar of SPEC §10 for an output of `dtype`.

    float32: 4 ULP (at the float64 result rounded to float32) + 2**-23 * sum|terms|.
    float16/bfloat16: 1 ULP of the output dtype (at the rounded result) + 2**-23 *
    sum|terms|. The last term is the float32 compute allowance: SPEC §8 makes float32
    the compute dtype for FLOAT16/BFLOAT16, so when the terms a cell receives nearly
    cancel, the float32 accumulation error can exceed a 16-bit ULP of the tiny result.
    Without cancellation it is far below 1 ULP and the bar is the plain 1 ULP.
    """
    dtype = np.dtype(dtype)
    golden = np.asarray(golden, dtype=np.float64)
    rounded = golden.astype(dtype).astype(np.float64) if dtype != BF16 else (
        golden.astype(np.float32).astype(BF16).astype(np.float64))
    ulps = 4.0 if dtype == F32 else 1.0
    return ulps * ulp(np.maximum(np.abs(rounded), np.abs(golden)), dtype) + 2.0**-23 * sum_abs


def assert_avgpool_close(actual, golden, sum_abs, dtype, what: str = "") -> None:
    """Assert `actual` (of `dtype`) is within the SPEC §10 AvgPool bar of the float64 golden."""
    dtype = np.dtype(dtype)
    actual = np.asarray(actual)
    assert actual.dtype == dtype, f"{what}: dtype {actual.dtype} != {dtype}"
    assert actual.shape == np.shape(golden), f"{what}: shape {actual.shape} != {np.shape(golden)}"
    a = widen(actual)
    g = np.asarray(golden, dtype=np.float64)
    sum_abs = np.asarray(sum_abs, dtype=np.float64)
    finite = np.isfinite(g) & np.isfinite(sum_abs)
    with np.errstate(invalid="ignore", over="ignore"):
        tol = np.where(finite, tolerance(np.where(finite, g, 0.0), np.where(finite, sum_abs, 0.0),
                                         dtype), 0.0)
        err = np.where(finite, np.abs(a - g), 0.0)
        # A finite golden that rounds past the dtype's largest value must give that inf.
        overflow = finite & np.isinf(g.astype(np.float32).astype(dtype).astype(np.float64))
        bad = finite & ~overflow & ~(err <= tol)  # a NaN actual is never within the bar
        bad |= overflow & (a != np.sign(g) * np.inf)
        # Non-finite goldens: NaN matches NaN only, +-inf the same-sign inf only.
        bad |= np.isnan(g) & ~np.isnan(a)
        bad |= np.isinf(g) & (a != g)
    if not bad.any():
        return
    with np.errstate(invalid="ignore", divide="ignore"):
        badness = np.where(bad, np.where(finite, err / tol, np.inf), -1.0)
    idx = np.unravel_index(int(np.argmax(badness)), g.shape)
    raise AssertionError(
        f"{what}: {int(bad.sum())} of {g.size} elements outside the bar ({dtype}); worst at "
        f"{list(map(int, idx))}: actual={a[idx]!r} golden={g[idx]!r} tol={tol[idx]!r} "
        f"sum|terms|={np.asarray(sum_abs)[idx]!r}")


def bits(a) -> np.ndarray:
    """Raw bit patterns of a float array (for byte-exact comparisons)."""
    a = np.array(a)
    return a.view({2: np.uint16, 4: np.uint32, 8: np.uint64}[a.dtype.itemsize])


# --------------------------------------------------------------------------- device helpers


def contiguous_strides(shape: Sequence[int]) -> list[int]:
    strides = [1] * len(shape)
    for i in range(len(shape) - 2, -1, -1):
        strides[i] = strides[i + 1] * max(int(shape[i + 1]), 1)
    return strides


def layout(shape: Sequence[int], kind: str) -> tuple[list[int], int, int]:
    """(strides, offset, storage_size) of a view of logical `shape` in layout `kind`.

    - "contiguous": row major, offset 0, storage exactly the view;
    - "channels_last": described as NCHW / (C, H, W) with the channel innermost in memory,
      strides (H*W*C, 1, W*C, C) (3-D: (1, W*C, C)); storage exactly the view;
    - "offset": row major at offset 7 inside a storage with 5 spare elements after it;
    - "gapped": row major over a W padded to 2*W+1 (every other element, plus a gap) at
      offset 3, so the view is interleaved with untouched elements.
    """
    shape = [int(d) for d in shape]
    numel = int(np.prod(shape))
    if kind == "contiguous":
        return contiguous_strides(shape), 0, max(numel, 1)
    if kind == "channels_last":
        if len(shape) == 4:
            _, c, h, w = shape
            strides = [h * w * c, 1, w * c, c]
        else:
            c, h, w = shape
            strides = [1, w * c, c]
        return strides, 0, max(numel, 1)
    if kind == "offset":
        return contiguous_strides(shape), 7, numel + 12
    if kind == "gapped":
        padded = [*shape[:-1], 2 * shape[-1] + 1]
        strides = contiguous_strides(padded)
        strides[-1] = 2
        return strides, 3, int(np.prod(padded)) + 3
    raise ValueError(kind)


LAYOUTS = ("contiguous", "channels_last", "offset", "gapped")


def view_positions(shape: Sequence[int], strides: Sequence[int], offset: int) -> np.ndarray:
    """Storage index of every element of the view, as an int64 array of `shape`."""
    pos = np.full(tuple(shape), offset, dtype=np.int64)
    for d, (n, s) in enumerate(zip(shape, strides)):
        pos = pos + (np.arange(n, dtype=np.int64) * s).reshape(
            [-1 if i == d else 1 for i in range(len(shape))])
    return pos


def layout_device(values, kind: str = "contiguous", fmt=None, fill=-777.0):
    """A DeviceTensor viewing `values` in layout `kind`; spare storage holds `fill`."""
    import aclnn
    from support import DeviceTensor

    values = np.asarray(values)
    if fmt is None:
        fmt = aclnn.ACL_FORMAT_NCHW
    strides, offset, size = layout(values.shape, kind)
    storage = np.full(size, fill, dtype=values.dtype)
    if values.size:
        pos = view_positions(values.shape, strides, offset)
        assert len(np.unique(pos)) == values.size
        storage[pos.reshape(-1)] = values.reshape(-1)
    return DeviceTensor(storage, values.shape, strides, offset, fmt)


def int_array(values):
    import aclnn

    return aclnn.aclCreateIntArray([int(v) for v in values])


def run_avgpool(grad_output, self_, grad_input, kernel, stride, padding, ceil_mode,
                count_include_pad, divisor_override, cube_math_type) -> int:
    """Both phases plus synchronize on DeviceTensors; `stride` None passes None.

    Creates and destroys the aclIntArrays; returns the first failing status (0 on success).
    """
    import aclnn
    from support import run_two_phase

    arrays = [int_array(kernel), None if stride is None else int_array(stride),
              int_array(padding)]
    try:
        return run_two_phase(
            aclnn.aclnnAvgPool2dBackwardGetWorkspaceSize, aclnn.aclnnAvgPool2dBackward,
            grad_output.tensor, self_.tensor, arrays[0], arrays[1], arrays[2], ceil_mode,
            count_include_pad, divisor_override, cube_math_type, grad_input.tensor)
    finally:
        for a in arrays:
            if a is not None:
                aclnn.aclDestroyIntArray(a)
