"""Parameter checks shared by the operators; each failure raises with a message that names
the operator, the parameter, the rule and the value it got."""

from __future__ import annotations

import math
import operator
from collections.abc import Sequence

import numpy as np

from ..dtypes import dtype_name
from ..tensor import aclTensor, element_reach
from .broadcast import broadcast_shapes
from .promotion import can_cast, promote_all
from .soc import SocProfile
from .status import ParamInvalidError, ParamNullptrError

MAX_RANK = 8


def _names(dtypes) -> str:
    return "[" + ", ".join(dtype_name(d) for d in dtypes) + "]"


def not_null(op: str, **arguments) -> None:
    """161001 for the first argument that is None, in the order given."""
    for name, value in arguments.items():
        if value is None:
            raise ParamNullptrError(f"{op}: {name} must not be null, got None.")


def live_tensors(op: str, **tensors) -> None:
    """161002 unless each argument is a live aclTensor (not destroyed, memory allocated)."""
    for name, value in tensors.items():
        if not isinstance(value, aclTensor):
            raise ParamInvalidError(
                f"{op}: {name} must be an aclTensor, got {type(value).__name__} {value!r}.")
        if value.destroyed:
            raise ParamInvalidError(
                f"{op}: {name} was destroyed (aclDestroyTensor), got {value!r}.")
        if not value.is_live():
            raise ParamInvalidError(f"{op}: {name}'s device memory was freed, got {value!r}.")


def dtype_value_in(op: str, soc: SocProfile, allowed: Sequence[int], what: str, dtype: int) -> None:
    """161002 unless `dtype` (of `what`) is in `allowed` (the list for this SoC)."""
    if dtype not in allowed:
        raise ParamInvalidError(
            f"{op}: {what} dtype {dtype_name(dtype)} is not supported on {soc.name}; "
            f"supported: {_names(allowed)}.")


def dtype_in(op: str, soc: SocProfile, allowed: Sequence[int], **tensors) -> None:
    """161002 unless each tensor's dtype is in `allowed` (the list for this SoC)."""
    for name, tensor in tensors.items():
        dtype_value_in(op, soc, allowed, name, tensor.dtype)


def rank_at_most(op: str, limit: int = MAX_RANK, **tensors) -> None:
    """161002 if a tensor has more than `limit` dims."""
    for name, tensor in tensors.items():
        if tensor.ndim > limit:
            raise ParamInvalidError(
                f"{op}: {name} rank must be <= {limit}, got {tensor.ndim} (shape "
                f"{list(tensor.view_shape)}).")


def int_choice(op: str, name: str, value, choices: dict[int, str]) -> int:
    """The int `value` if it is one of `choices` (value -> meaning); 161002 otherwise."""
    allowed = ", ".join(f"{k} ({v})" for k, v in choices.items())
    if not isinstance(value, (bool, np.bool_)):
        try:
            index = operator.index(value)
        except TypeError:
            index = None
        if index in choices:
            return index
    raise ParamInvalidError(f"{op}: {name} must be one of {allowed}, got {value!r}.")


def real_number(op: str, name: str, value) -> float:
    """`value` as a float if it is a real number (not bool); 161002 otherwise."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer,
                                                                      np.floating)):
        raise ParamInvalidError(
            f"{op}: {name} must be a float, got {type(value).__name__} {value!r}.")
    return float(value)


def non_negative(op: str, name: str, value: float) -> None:
    """161002 unless value >= 0 (NaN fails)."""
    if not value >= 0 or math.isnan(value):
        raise ParamInvalidError(f"{op}: {name} must be >= 0, got {value!r}.")


def promoted(op: str, **tensors) -> int:
    """The left-to-right promotion of the tensors' dtypes; 161002 if a pair cannot promote."""
    names = list(tensors)
    dtypes = [t.dtype for t in tensors.values()]
    result = dtypes[0]
    for name, dtype in zip(names[1:], dtypes[1:]):
        step = promote_all(result, dtype)
        if step is None:
            detail = ", ".join(f"{n} {dtype_name(d)}" for n, d in zip(names, dtypes))
            raise ParamInvalidError(
                f"{op}: the dtypes of {', '.join(names)} cannot be promoted ({detail}): "
                f"{dtype_name(result)} does not promote with {name} {dtype_name(dtype)}.")
        result = step
    return result


def castable(op: str, dtype: int, name: str, tensor: aclTensor) -> None:
    """161002 unless the promoted `dtype` can be written to `tensor`'s dtype."""
    if not can_cast(dtype, tensor.dtype):
        raise ParamInvalidError(
            f"{op}: the promoted dtype {dtype_name(dtype)} cannot be cast to {name} dtype "
            f"{dtype_name(tensor.dtype)}.")


def broadcast(op: str, **tensors) -> tuple[int, ...]:
    """The broadcast shape of the tensors' views; 161002 if they do not broadcast."""
    shapes = [t.view_shape for t in tensors.values()]
    result = broadcast_shapes(*shapes)
    if result is None:
        detail = ", ".join(f"{n} {list(t.view_shape)}" for n, t in tensors.items())
        raise ParamInvalidError(f"{op}: the shapes of {detail} cannot broadcast.")
    return result


def shape_equals(op: str, name: str, tensor: aclTensor, shape: Sequence[int], what: str) -> None:
    """161002 unless `tensor`'s view shape equals `shape` (described by `what`)."""
    if tuple(tensor.view_shape) != tuple(shape):
        raise ParamInvalidError(
            f"{op}: {name} shape must equal {what} {list(shape)}, got {list(tensor.view_shape)}.")


def _byte_range(tensor: aclTensor) -> tuple[int, int]:
    """[first, last] address a non-empty tensor touches."""
    low, high = element_reach(tensor.view_shape, tensor.strides, tensor.offset)
    return tensor.addr + low * tensor.itemsize, tensor.addr + (high + 1) * tensor.itemsize - 1


def _self_overlapping(tensor: aclTensor) -> bool:
    """Whether two elements of the view may share an address: the strides, sorted, must
    each step past everything the smaller ones span (so a stride 0 over a dim of size > 1
    always overlaps; rarer interleaved layouts are refused too)."""
    span = 1
    for stride, size in sorted((abs(s), n) for n, s in zip(tensor.view_shape, tensor.strides)
                               if n > 1):
        if stride < span:
            return True
        span += stride * (size - 1)
    return False


def _same_view(a: aclTensor, b: aclTensor) -> bool:
    return (a.dtype == b.dtype
            and a.region.addr + a.byte_offset() == b.region.addr + b.byte_offset()
            and tuple(a.view_shape) == tuple(b.view_shape) and tuple(a.strides) == tuple(b.strides))


def _shares_memory(a: aclTensor, b: aclTensor) -> bool:
    """Whether two non-empty views have an element in common (exactly, or conservatively
    True when that is too hard to decide). Views of different regions may share memory
    too: the functional API lends two views of one array as two regions."""
    (a_low, a_high), (b_low, b_high) = _byte_range(a), _byte_range(b)
    if a_high < b_low or b_high < a_low:
        return False
    try:
        return bool(np.shares_memory(a.numpy_view(), b.numpy_view(), max_work=10**6))
    except np.exceptions.TooHardError:
        return True


def _overlapping_input(out: aclTensor, in_place: bool, inputs: dict) -> str | None:
    """The name of the first input sharing memory with `out` (other than as the very same
    view, when `in_place`), or None."""
    for name, tensor in inputs.items():
        a, b = tensor.region, out.region
        if tensor.numel == 0 or a.addr + a.size <= b.addr or b.addr + b.size <= a.addr:
            continue  # nothing in common (the usual case: separate allocations)
        if in_place and _same_view(tensor, out):
            continue
        if _shares_memory(tensor, out):
            return name
    return None


def output_aliases(out: aclTensor, **inputs) -> bool:
    """Whether `out` shares memory with an input other than as the very same view."""
    return out.numel > 0 and _overlapping_input(out, True, inputs) is not None


def output_memory(op: str, out_name: str, out: aclTensor, in_place: bool, library: bool = False,
                  **inputs) -> None:
    """161002 if the output's elements overlap each other, or (unless `library`) if it
    shares memory with an input other than as the very same view (which `in_place`
    allows: elementwise operators read each element before writing it). Otherwise the
    result would depend on the order of the writes. The library computes into its own
    buffer and copies the result into the output (ViewCopy), so there an output may
    share memory with its inputs (ledger C14)."""
    if out.numel == 0:
        return
    if _self_overlapping(out):
        raise ParamInvalidError(
            f"{op}: {out_name}'s elements must not overlap each other, got strides "
            f"{list(out.strides)} over shape {list(out.view_shape)}.")
    if library:
        return
    name = _overlapping_input(out, in_place, inputs)
    if name is not None:
        allowed = " unless it is the very same view (in place)" if in_place else ""
        raise ParamInvalidError(
            f"{op}: {out_name} must not share memory with {name}{allowed}; got "
            f"{out_name} {out!r} and {name} {inputs[name]!r}.")

