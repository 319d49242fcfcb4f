"""Broadcast inference with NumPy's rules."""

from __future__ import annotations

from collections.abc import Sequence


def broadcast_shapes(*shapes: Sequence[int]) -> tuple[int, ...] | None:
    """The broadcast of `shapes` (right-aligned, 1 stretches, 0 with 1 gives 0), or None."""
    rank = max((len(s) for s in shapes), default=0)
    result = [1] * rank
    for shape in shapes:
        for i, size in enumerate(shape, start=rank - len(shape)):
            if size == result[i] or size == 1:
                continue
            if result[i] != 1:
                return None
            result[i] = size
    return tuple(result)
