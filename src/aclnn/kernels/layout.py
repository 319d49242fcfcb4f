"""Iteration layouts for strided, broadcast operands (pure Python, run once per plan).

An operand is (shape, strides in bytes) over the iteration shape; broadcast dims have
stride 0. `coalesce` orders the dims so the output's innermost stride comes last, merges
dims that are contiguous for every operand at once, and pads to `MAX_RANK` dims, which is
the fixed rank the tiled kernel iterates over.
"""

from __future__ import annotations

from collections.abc import Sequence

MAX_RANK = 8


def broadcast_strides(shape: Sequence[int], strides: Sequence[int], out_shape: Sequence[int]):
    """`strides` of an operand of `shape`, right-aligned to `out_shape`; 0 where broadcast."""
    pad = len(out_shape) - len(shape)
    result = [0] * pad
    for size, stride, out_size in zip(shape, strides, out_shape[pad:]):
        result.append(stride if size == out_size and size != 1 else 0)
    return result


def coalesce(shape: Sequence[int], operand_strides: Sequence[Sequence[int]]):
    """(shape, strides per operand) with the fewest dims, padded to MAX_RANK (as lists).

    The last operand is the output: dims are ordered by its |stride|, largest first.
    """
    dims = [i for i, size in enumerate(shape) if size != 1]
    out = operand_strides[-1]
    dims.sort(key=lambda i: (abs(out[i]), abs(operand_strides[0][i])), reverse=True)
    merged_shape: list[int] = []
    merged: list[list[int]] = [[] for _ in operand_strides]
    for i in dims:
        if merged_shape and all(
            strides[-1] == s[i] * shape[i] for strides, s in zip(merged, operand_strides)
        ):
            merged_shape[-1] *= shape[i]
            for strides, s in zip(merged, operand_strides):
                strides[-1] = s[i]
            continue
        merged_shape.append(shape[i])
        for strides, s in zip(merged, operand_strides):
            strides.append(s[i])
    if len(merged_shape) > MAX_RANK:
        raise ValueError(f"cannot iterate over {len(merged_shape)} dims (max {MAX_RANK})")
    pad = [1] * (MAX_RANK - len(merged_shape))
    return pad + merged_shape, [[0] * len(pad) + s for s in merged]
