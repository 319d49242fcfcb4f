"""Compiled kernels come from Numba's on-disk cache: a second process compiles nothing.

Each process below calls every operator through the functional API on a contiguous
layout (the flat kernels: of one block and of more) and on a transposed and a broadcast one
(the tiled kernel, once per operator), then reports, for every Numba dispatcher of
`aclnn.kernels`, the signatures it compiled and those it loaded from the cache.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numba
import numpy as np
import pytest
from benchmarks import probe

import aclnn
from aclnn import kernels

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
    more = np.linspace(-3, 3, 4097).astype(dtype)  # past one block: the parallel kernels
    aclnn.smooth_l1_loss_backward(more, more, more[::-1].copy(), reduction="none")
    aclnn.gelu_backward(more, more, approximate="none")
"""
REPORT = """
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
    done = subprocess.run([sys.executable, "-c", CALLS + REPORT], check=True,
                          capture_output=True, text=True, timeout=600)
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.slow(compiles_here=True)
def test_a_second_process_loads_every_kernel_from_the_cache():
    exec(CALLS, {})  # in this process: fills the cache wherever it was cold
    report = _report()
    used = {name: counts for name, counts in report.items() if sum(counts)}
    assert {f"aclnn.kernels.{name}" for name in (
        "pointwise._tiled_backward", "smooth_l1_rows.smooth_l1_flat", "gelu_rows.gelu_flat",
        "smooth_l1_rows.smooth_l1_block", "gelu_rows.gelu_block")} <= set(used)
    assert {name: compiled for name, (compiled, _) in used.items() if compiled} == {}
    assert report["aclnn.kernels.pointwise._tiled_backward"][1] == 2  # once per operator


GELU_CALLS = """
x = np.linspace(-3, 3, 64 * 64, dtype=np.float32).reshape(64, 64)
results = [aclnn.gelu_backward(np.ones_like(x), x, approximate="tanh"),
           aclnn.gelu_backward(np.ones_like(x), x.T.copy().T, approximate="tanh")]
results = [np.asarray(r, np.float64).ravel().tolist() for r in results]
"""
GELU_BOTH_WAYS = "import json\nimport numpy as np\nimport aclnn\n" + GELU_CALLS + \
    "print(json.dumps(results))\n"


def _gelu_both_ways(package_parent) -> tuple[list, list]:
    """GELU (tanh) by the flat kernel and by the tiled one, in a fresh process importing
    the aclnn package under `package_parent`."""
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_CACHE_DIR"}
    env["PYTHONPATH"] = str(package_parent)
    done = subprocess.run([sys.executable, "-c", GELU_BOTH_WAYS], check=True,
                          capture_output=True, text=True, timeout=600, env=env)
    contiguous, strided = json.loads(done.stdout.strip().splitlines()[-1])
    return contiguous, strided


@pytest.mark.slow(compiles_here=True)
def test_a_change_to_a_module_recompiles_the_kernels_that_compile_it_in(tmp_path):
    """The tiled kernel (pointwise.py) compiles gelu_rows' rows into itself: after a change
    to gelu_rows.py alone, a new process recompiles it too, instead of running the old rows
    from the cache (Numba's own stamp covers only the function's file). The copy of the
    package starts with its cache, which the same calls in this process have just filled:
    the first process loads both kernels from it (compiling them took half of this test's
    two minutes on a 2 GHz Zen 1) and the second must not."""
    here = {"np": np, "aclnn": aclnn}
    exec(GELU_CALLS, here)
    copy = tmp_path / "aclnn"
    shutil.copytree(Path(aclnn.__file__).parent, copy)  # modification times kept
    before = _gelu_both_ways(tmp_path)
    assert list(before) == here["results"] and before[0] == before[1]
    rows = copy / "kernels" / "gelu_rows.py"
    text = rows.read_text()
    assert "_W = (f(2 * _K), f(6 * _K * _C))" in text
    rows.write_text(text.replace("_W = (f(2 * _K), f(6 * _K * _C))", "_W = (f(0.0), f(0.0))"))
    after = _gelu_both_ways(tmp_path)
    assert after[0] != before[0]
    assert after[1] == after[0]


def test_saves_of_two_signatures_at_once_keep_each_its_own_data(tmp_path):
    """Two savers of one function's cache, each made to wait after reading the index until
    the other has read it too (or 1 s): unlocked, both would read the empty index and pick
    the same data file; with aclnn's lock the second reads the index the first wrote."""
    import threading

    from numba.core import caching

    import aclnn.kernels  # noqa: F401  (installs the lock)

    read = [threading.Event(), threading.Event()]

    def saver(me: int, key: str, data: str) -> None:
        cache = caching.IndexDataCacheFile(str(tmp_path), "kernel-1.py3", "stamp")
        load_index = cache._load_index

        def load_then_wait():
            overloads = load_index()
            read[me].set()
            read[1 - me].wait(1.0)
            return overloads

        cache._load_index = load_then_wait
        cache.save(key, data)

    threads = [threading.Thread(target=saver, args=(i, f"key{i}", f"data{i}")) for i in (0, 1)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    cache = caching.IndexDataCacheFile(str(tmp_path), "kernel-1.py3", "stamp")
    assert [cache.load(f"key{i}") for i in (0, 1)] == ["data0", "data1"]
    assert len(list(tmp_path.glob("*.nbc"))) == 2


def test_the_benchmark_probes_cache_goes_stale_with_the_kernels_sources():
    """The benchmarks' cached probes compile the kernels' rows into themselves (a loss
    case's compute floor runs `smooth_l1_rows.smooth_l1_row`): their cache is stamped with
    every kernel source too, so a change to a kernel alone recompiles them."""
    cached = {name: value for name, value in vars(probe).items()
              if isinstance(value, numba.core.registry.CPUDispatcher) and value._cache
              and hasattr(value._cache, "_impl")}
    assert {"_loss_rows", "_gelu_rows", "_staged_triad"} <= set(cached)
    for name, dispatcher in cached.items():
        stamp = dispatcher._cache._impl.locator.get_source_stamp()
        assert stamp[1] == kernels.SOURCES_DIGEST, name
