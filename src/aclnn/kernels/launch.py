"""Launching parallel kernels from any number of threads, on any Numba threading layer.

Numba picks its threading layer at the first parallel launch: `tbb` or `omp` where the
machine has them, else `workqueue`, which aborts the process when two threads launch at
once. So the first launch, and every launch on a layer that is not threadsafe, holds one
process-wide lock; on a threadsafe layer launches run concurrently.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

import numba

UNSAFE_LAYERS = frozenset({"workqueue"})

_lock = threading.Lock()
_layer_is_threadsafe = False  # unknown (False) until the first launch has picked the layer


def layer_is_threadsafe() -> bool:
    """Whether launches run concurrently: the layer picked so far is threadsafe."""
    return _layer_is_threadsafe


def launch(run: Callable[[], None]) -> None:
    """Run the kernel call `run`, serialised with every other launch unless the threading
    layer is known to be threadsafe."""
    global _layer_is_threadsafe
    if _layer_is_threadsafe:
        run()
        return
    with _lock:
        run()
        try:
            _layer_is_threadsafe = numba.threading_layer() not in UNSAFE_LAYERS
        except ValueError:  # no parallel region has run yet: the layer is still unpicked
            pass
