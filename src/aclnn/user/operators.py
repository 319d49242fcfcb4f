"""The four operators as the command line sees them: the tensor and attribute names of
the case files, the call (through the functional API) and the float64 golden."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..dtypes import ACL_DTYPE
from ..kernels import pool
from ..ops._avgpool_graphs import Window
from ..ops.avg_pool2d_backward import golden_rounding
from . import functional, golden

_ROUNDING_NAMES = {pool.EXACT: "exact", pool.ROUND_FP16: "fp16", pool.ROUND_HF32: "hf32"}

Arrays = Mapping[str, np.ndarray]
Attrs = Mapping[str, Any]


@dataclass(frozen=True)
class OpSpec:
    """One operator: `tensors` in argument order (with `aliases` accepted in case files),
    attribute defaults (None: passed as null), the call, the golden of the output's rows
    `rows` (a slice along its first dim; slice(None) for the whole output) and the output's
    shape from the tensors' shapes."""

    name: str
    tensors: tuple[str, ...]
    defaults: Mapping[str, Any]
    call: Callable[[Arrays, Attrs], np.ndarray]
    golden: Callable[[Arrays, Attrs, slice], np.ndarray]
    out_shape: Callable[[Mapping[str, tuple[int, ...]]], tuple[int, ...]]
    aliases: Mapping[str, str] | None = None

    def tensor_name(self, name: str) -> str | None:
        """The canonical name of a tensor input named `name` in a case file, or None."""
        if name in self.tensors:
            return name
        return (self.aliases or {}).get(name)


def _reduction(attrs: Attrs) -> int:
    value = attrs["reduction"]
    return functional.REDUCTIONS[value] if isinstance(value, str) else int(value)


def _pair(values, default=None) -> tuple[int, int]:
    """A kernel/stride/padding int or list of length 1 or 2 as (h, w); empty or None:
    `default`."""
    if isinstance(values, int):
        return values, values
    if values is None or len(values) == 0:
        return default
    return (values[0], values[0]) if len(values) == 1 else (values[0], values[1])


def broadcast_shape(shapes: Mapping[str, tuple[int, ...]]) -> tuple[int, ...]:
    """The shape the tensors broadcast to (the largest size per dim where they do not: the
    call rejects them, and this only sizes the output for the memory estimate)."""
    rank = max(len(shape) for shape in shapes.values())
    padded = [(1,) * (rank - len(shape)) + tuple(shape) for shape in shapes.values()]
    return tuple(max(sizes) for sizes in zip(*padded))


def _rows_of(array: np.ndarray, rank: int, rows: slice) -> np.ndarray:
    """The part of an operand that output rows `rows` (along the first of `rank` dims) read:
    its own rows where it spans that dim, else all of it (broadcast)."""
    if rows == slice(None) or array.ndim < rank or array.shape[0] == 1:
        return array
    return array[rows]


def _pointwise_golden(math: Callable, names: tuple[str, ...], count_of: Callable | None):
    """The golden of a pointwise operator's output rows: `math` on the operands' matching
    rows, a mean reduction dividing by the count of the whole call (`count_of`)."""
    def rows_golden(a: Arrays, t: Attrs, rows: slice) -> np.ndarray:
        rank = len(broadcast_shape({n: a[n].shape for n in names}))
        parts = [_rows_of(a[n], rank, rows) for n in names]
        count = count_of(a) if count_of is not None else None
        return math(*parts, t, count)
    return rows_golden


def _pool_golden(a: Arrays, t: Attrs, rows: slice) -> np.ndarray:
    """The golden of a call that succeeded (so its parameters are valid), with the
    cubeMathType rounding the current SoC applies; rows along the first dim (N, or C of a
    3-D input) are independent."""
    kernel = _pair(t["kernel_size"])
    stride, padding = _pair(t["stride"], kernel), _pair(t["padding"])
    grad = a["gradOutput"]
    window = Window(kernel, stride, padding, bool(t["ceil_mode"]), bool(t["count_include_pad"]),
                    int(t["divisor_override"]), int(t["cube_math_type"]))
    rounding = golden_rounding(ACL_DTYPE[grad.dtype], a["self"].shape, grad.shape, window)
    part = grad[rows]
    return golden.avg_pool2d_backward(
        part, (part.shape[0], *a["self"].shape[1:]), kernel, stride, padding,
        bool(t["count_include_pad"]), t["divisor_override"], _ROUNDING_NAMES[rounding])


OPERATORS: dict[str, OpSpec] = {op.name: op for op in (
    OpSpec(
        "SmoothL1LossBackward", ("gradOut", "self", "target"),
        {"reduction": "mean", "beta": 1.0},
        lambda a, t: functional.smooth_l1_loss_backward(
            a["gradOut"], a["self"], a["target"], t["reduction"], t["beta"]),
        _pointwise_golden(
            lambda g, x, y, t, count: golden.smooth_l1_loss_backward(
                g, x, y, _reduction(t), float(t["beta"]), count),
            ("gradOut", "self", "target"), lambda a: a["self"].size),
        broadcast_shape, aliases={"gradOutput": "gradOut"}),
    OpSpec(
        "L1LossBackward", ("gradOutput", "self", "target"), {"reduction": "mean"},
        lambda a, t: functional.l1_loss_backward(
            a["gradOutput"], a["self"], a["target"], t["reduction"]),
        _pointwise_golden(
            lambda g, x, y, t, count: golden.l1_loss_backward(g, x, y, _reduction(t), count),
            ("gradOutput", "self", "target"),
            lambda a: math.prod(broadcast_shape({k: v.shape for k, v in a.items()}))),
        broadcast_shape, aliases={"gradOut": "gradOutput"}),
    OpSpec(
        "GeluBackwardV2", ("gradOutput", "self"), {"approximate": "none"},
        lambda a, t: functional.gelu_backward(a["gradOutput"], a["self"], t["approximate"]),
        _pointwise_golden(lambda g, x, t, _: golden.gelu_backward(g, x, t["approximate"]),
                          ("gradOutput", "self"), None),
        broadcast_shape, aliases={"gradOut": "gradOutput"}),
    OpSpec(
        "AvgPool2dBackward", ("gradOutput", "self"),
        {"kernel_size": None, "stride": None, "padding": [0], "ceil_mode": False,
         "count_include_pad": True, "divisor_override": 0, "cube_math_type": 1},
        lambda a, t: functional.avg_pool2d_backward(
            a["gradOutput"], a["self"], t["kernel_size"], t["stride"], t["padding"],
            t["ceil_mode"], t["count_include_pad"], t["divisor_override"],
            t["cube_math_type"]),
        _pool_golden, lambda shapes: tuple(shapes["self"]),
        aliases={"gradOut": "gradOutput"}),
)}


def find_operator(name: str) -> OpSpec | None:
    """The operator named `name`, with or without the `aclnn` prefix."""
    return OPERATORS.get(name.removeprefix("aclnn")) if isinstance(name, str) else None
