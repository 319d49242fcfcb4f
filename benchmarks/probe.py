"""The memory-bandwidth probe: Numba `prange` copy and triad (3 reads + 1 write) on
float32 arrays, run on 2 threads. A triad is the yardstick of the table's "x triad"
column: the case's own same-bytes triad where it has one (see `cases.measure_throughput`),
else the run's triad row."""

from __future__ import annotations

import numba
import numpy as np
import torch
from numba import prange

from .harness import Setup

THREADS = 2


@numba.njit(parallel=True, cache=True)
def _copy(dst, src):
    for i in prange(dst.size):
        dst[i] = src[i]


@numba.njit(parallel=True, cache=True)
def _triad(out, a, b, c):
    for i in prange(out.size):
        out[i] = a[i] + b[i] * c[i]


def copy_setup(n: int) -> Setup:
    """Copy n float32 elements: Numba vs torch `Tensor.copy_` (2 x 4n bytes)."""
    numba.set_num_threads(THREADS)
    src = np.random.default_rng(0).standard_normal(n, dtype=np.float32)
    dst = np.zeros_like(src)
    t_src, t_dst = torch.from_numpy(src.copy()), torch.zeros(n)
    return Setup(lambda: _copy(dst, src), lambda: t_dst.copy_(t_src), 2 * 4 * n, n)


def triad_setup(n: int) -> Setup:
    """out = a + b * c on n float32 elements: Numba vs `torch.addcmul(out=)` (4 x 4n bytes)."""
    numba.set_num_threads(THREADS)
    rng = np.random.default_rng(1)
    a, b, c = (rng.standard_normal(n, dtype=np.float32) for _ in range(3))
    out = np.zeros_like(a)
    ta, tb, tc = (torch.from_numpy(x.copy()) for x in (a, b, c))
    t_out = torch.zeros(n)
    return Setup(lambda: _triad(out, a, b, c),
                 lambda: torch.addcmul(ta, tb, tc, out=t_out), 4 * 4 * n, n)
