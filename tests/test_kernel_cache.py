"""Compiled kernels come from Numba's on-disk cache: a second process compiles nothing.

Each process below calls every operator through the functional API on a contiguous
layout (the flat kernels) and on a transposed and a broadcast one (the tiled kernel, once
per operator), then reports, for every Numba dispatcher of `aclnn.kernels`, the
signatures it compiled and those it loaded from the cache.
"""

from __future__ import annotations

import json
import subprocess
import sys

CALLS = """
import json
import numpy as np
import numba
import aclnn
from aclnn.kernels import bits, gelu_rows, lanes, pointwise, pool
from aclnn.kernels import smooth_l1_rows, typed

a = np.linspace(-3, 3, 64 * 64, dtype=np.float32).reshape(64, 64)
column = a[:, :1].copy()
for dtype in (np.float32, np.float16):
    x = a.astype(dtype)
    for self_ in (x, x.T):
        aclnn.smooth_l1_loss_backward(x, self_, column.astype(dtype), reduction="none")
        aclnn.l1_loss_backward(x, self_, x, reduction="mean")
        aclnn.gelu_backward(x, self_, approximate="tanh")
    aclnn.avg_pool2d_backward(x[None, None, :32, :32], x[None, None], 3, 2, 1)

report = {}
for module in (bits, gelu_rows, lanes, pointwise, pool, smooth_l1_rows, typed):
    for name, value in vars(module).items():
        if isinstance(value, numba.core.registry.CPUDispatcher):
            report[f"{module.__name__}.{name}"] = [len(value.stats.cache_misses),
                                                   len(value.stats.cache_hits)]
print(json.dumps(report))
"""


def _report() -> dict[str, list[int]]:
    """{kernel: [signatures compiled, signatures loaded from the cache]} of a fresh process."""
    done = subprocess.run([sys.executable, "-c", CALLS], check=True, capture_output=True,
                          text=True, timeout=600)
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_a_second_process_loads_every_kernel_from_the_cache():
    _report()  # fills the cache wherever it was cold
    report = _report()
    used = {name: counts for name, counts in report.items() if sum(counts)}
    assert {"aclnn.kernels.pointwise._tiled_backward", "aclnn.kernels.smooth_l1_rows."
            "smooth_l1_flat", "aclnn.kernels.gelu_rows.gelu_flat"} <= set(used)
    assert {name: compiled for name, (compiled, _) in used.items() if compiled} == {}
    assert report["aclnn.kernels.pointwise._tiled_backward"][1] == 2  # once per operator
