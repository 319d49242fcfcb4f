"""The l0 steps an operator's op_api chains (Contiguous, BroadcastTo, Cast, the kernel,
ViewCopy), recorded on a `workspace.Graph` so phase 1 reports the workspace the library's
graph needs (ledger W). Each step is a no-op where the library's is: Contiguous of a
contiguous tensor, BroadcastTo to the same shape, Cast to the same dtype.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from ..dtypes import ITEMSIZE
from ..framework.workspace import Graph
from ..tensor import aclTensor


@dataclass(frozen=True)
class Value:
    """A tensor of the graph: `id` is its workspace tensor, None for the user's tensor."""

    id: int | None
    shape: tuple[int, ...]
    dtype: int
    contiguous: bool


def is_contiguous(shape: Sequence[int], strides: Sequence[int]) -> bool:
    """opbase IsContiguous: 0 or 1 element, or row-major strides over the dims larger than 1."""
    if math.prod(shape) <= 1:
        return True
    expected = 1
    for size, stride in zip(reversed(shape), reversed(strides)):
        if size == 1:
            continue
        if stride != expected:
            return False
        expected *= size
    return True


def user(tensor: aclTensor) -> Value:
    """A user tensor as the graph's input."""
    return Value(None, tuple(tensor.view_shape), tensor.dtype,
                 is_contiguous(tensor.view_shape, tensor.strides))


def _nbytes(shape: Sequence[int], dtype: int) -> int:
    return math.prod(shape) * ITEMSIZE[dtype]


def _step(graph: Graph, value: Value, shape: tuple[int, ...], dtype: int) -> Value:
    (out,) = graph.kernel([value.id], [_nbytes(shape, dtype)])
    return Value(out, shape, dtype, True)


def contiguous(graph: Graph, value: Value) -> Value:
    """l0op::Contiguous: a copy into the workspace unless already contiguous."""
    return value if value.contiguous else _step(graph, value, value.shape, value.dtype)


def broadcast_to(graph: Graph, value: Value, shape: tuple[int, ...]) -> Value:
    """l0op::BroadcastTo, done where the view's shape is not `shape`."""
    return value if value.shape == tuple(shape) else _step(graph, value, tuple(shape), value.dtype)


def cast(graph: Graph, value: Value, dtype: int) -> Value:
    """l0op::Cast, done where the dtype differs."""
    return value if value.dtype == dtype else _step(graph, value, value.shape, dtype)


def compute(graph: Graph, inputs: Sequence[Value], shape: tuple[int, ...], dtype: int,
            scratch: int = 0) -> Value:
    """The operator's kernel: its output in the workspace (and its own tiling workspace)."""
    (out,) = graph.kernel([v.id for v in inputs], [_nbytes(shape, dtype)], scratch)
    return Value(out, tuple(shape), dtype, True)


def view_copy(graph: Graph, value: Value, out: aclTensor) -> None:
    """l0op::ViewCopy into the user's output: a contiguous output takes the result in place
    (the producing kernel writes it directly, so that tensor leaves the workspace); a
    non-contiguous one needs a copy kernel."""
    if user(out).contiguous:
        graph.redirect(value.id)
    else:
        graph.kernel([value.id], [])
