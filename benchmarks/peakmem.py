"""Peak-memory probe, run in a fresh interpreter: ``python -m benchmarks.peakmem N``.

Builds a float16 SmoothL1LossBackward call on N elements (gradOut, self, target and the
output all N elements, made resident), then measures how far the resident set rises
above that baseline during the call: the high-water mark (VmHWM, reset through
/proc/self/clear_refs just before the call) minus the resident set (VmRSS) after setup.
A warm-up call of WARM_ELEMENTS first loads the kernel the measured call takes (with a
stale Numba cache it compiled within the measured call: 16.3 MiB extra, against 0
after the warm-up). Prints one JSON object. Imports only aclnn and NumPy, so nothing
else grows the process.
"""

from __future__ import annotations

import gc
import json
import sys
import time

import numpy as np

import aclnn
from aclnn import acl
from aclnn.kernels.smooth_l1_rows import BLOCK

# the smallest call that takes the measured call's kernel (the contiguous parallel one;
# calls of up to BLOCK elements run on the calling thread, `smooth_l1_block`)
WARM_ELEMENTS = BLOCK + 1


def _status_kib(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"{field} not in /proc/self/status")


def _reset_high_water_mark() -> bool:
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def _call(n: int, fill: bool) -> tuple:
    """Device tensors for an n-element float16 call and a runner of its two phases."""
    ptrs, tensors = [], []
    for seed in range(4):
        ptr, ret = acl.rt.malloc(2 * n, acl.ACL_MEM_MALLOC_HUGE_FIRST)
        assert ret == 0
        ptrs.append(ptr)
        if seed < 3:
            host = np.random.default_rng(seed).standard_normal(n, np.float32).astype(np.float16)
            assert acl.rt.memcpy(ptr, 2 * n, acl.util.numpy_to_ptr(host), 2 * n,
                                 acl.ACL_MEMCPY_HOST_TO_DEVICE) == 0
            del host
        elif fill:
            assert acl.rt.memset(ptr, 2 * n, 0, 2 * n) == 0
        tensors.append(aclnn.aclCreateTensor([n], aclnn.ACL_FLOAT16, [1], 0,
                                             aclnn.ACL_FORMAT_ND, [n], ptr))

    def run() -> None:
        ws, ex, ret = aclnn.aclnnSmoothL1LossBackwardGetWorkspaceSize(*tensors[:3], 0, 1.0,
                                                                      tensors[3])
        assert ret == 0, aclnn.aclGetRecentErrMsg()
        assert aclnn.aclnnSmoothL1LossBackward(None, ws, ex, None) == 0
        assert acl.rt.synchronize_stream(None) == 0, aclnn.aclGetRecentErrMsg()

    return run, ptrs


def measure(n: int) -> dict:
    """Peak RSS growth of one n-element float16 SmoothL1LossBackward call."""
    acl.init()
    acl.rt.set_device(0)
    warm, _ = _call(WARM_ELEMENTS, True)  # loads the kernel: not part of the measured call
    warm()
    run, _ = _call(n, True)
    gc.collect()
    baseline = _status_kib("VmRSS") * 1024
    reset = _reset_high_water_mark()
    t0 = time.perf_counter()
    run()
    seconds = time.perf_counter() - t0
    peak = _status_kib("VmHWM") * 1024
    io_bytes = 4 * 2 * n
    extra = max(peak - baseline, 0)
    return {"n": n, "io_bytes": io_bytes, "baseline_rss": baseline, "peak_rss": peak,
            "extra_bytes": extra, "extra_fraction": extra / io_bytes,
            "peak_over_io": (io_bytes + extra) / io_bytes, "seconds": seconds,
            "hwm_reset": reset}


if __name__ == "__main__":
    print(json.dumps(measure(int(sys.argv[1]))))
