"""The pointwise kernels' tiling: whatever the order tiles are visited in (row order for
single-row tiles, column bands for tall ones), every element of the iteration space lies
in exactly one tile, and tiles stay inside it."""

import numpy as np
import pytest
from numba import njit

from aclnn.kernels.layout import MAX_RANK
from aclnn.kernels.pointwise import _tile_count, _tile_span


@njit
def _coverage(shape, tile_rows, tile_cols):
    count, mid_tiles, col_tiles = _tile_count(shape, tile_rows, tile_cols)
    rows_total = 1
    for d in range(MAX_RANK - 1):
        rows_total *= shape[d]
    hits = np.zeros((rows_total, shape[MAX_RANK - 1]), np.int64)
    for c in range(count):
        first, rows, start, n = _tile_span(shape, mid_tiles, col_tiles, tile_rows, tile_cols, c)
        hits[first:first + rows, start:start + n] += 1
    return hits


@pytest.mark.parametrize("outer, mid, cols", [(1, 1, 1), (1, 67, 301), (3, 33, 1030),
                                              (2, 16, 512), (1, 4096, 17), (5, 1, 2049)])
@pytest.mark.parametrize("tile", [(1, 4096), (16, 256), (16, 128), (4, 8)])
def test_every_element_in_exactly_one_tile(outer, mid, cols, tile):
    shape = np.array([1] * (MAX_RANK - 3) + [outer, mid, cols], np.int64)
    hits = _coverage(shape, *tile)
    assert hits.shape == (outer * mid, cols)
    assert (hits == 1).all()
