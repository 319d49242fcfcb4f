"""The C API from C (SPEC §13): every function with valid and hostile arguments, many C
threads, a dlopen(RTLD_LOCAL) host, a Python host sharing the runtime, a start-up that
fails, and a sample under valgrind. The C programs are in tests/c."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import xml.etree.ElementTree as ElementTree

import pytest

from aclnn.capi import sdk
from capi_support import (
    C_TESTS,
    SAMPLES,
    compile_program,
    python_sample,
    run_program,
)

START_FAILED = 500001  # ACL_ERROR_FAILURE


@pytest.fixture(scope="module")
def programs(sdk_prefix, tmp_path_factory):
    """The test programs, built once: sanitized C, and the SmoothL1 sample without."""
    out = tmp_path_factory.mktemp("programs")
    return {
        "calls": compile_program(sdk_prefix, [C_TESTS / "capi_calls.c"], out / "calls"),
        "threads": compile_program(sdk_prefix, [C_TESTS / "capi_threads.c"], out / "threads"),
        "thread_state": compile_program(sdk_prefix, [C_TESTS / "capi_thread_state.c"],
                                        out / "thread_state"),
        "dlopen": compile_program(sdk_prefix, [C_TESTS / "capi_dlopen.c"], out / "dlopen",
                                  link=False),
        "no_runtime": compile_program(sdk_prefix, [C_TESTS / "capi_no_runtime.c"],
                                      out / "no_runtime"),
        "sample": compile_program(sdk_prefix, [SAMPLES / "smooth_l1_loss_backward.cpp"],
                                  out / "sample", cxx=True, sanitize=False,
                                  extra=(f"-I{SAMPLES}",)),
    }


@pytest.mark.parametrize("contract", ["documented", "library"])
@pytest.mark.parametrize("soc", ["Ascend910B", "Ascend950"])
def test_every_function_valid_and_hostile(programs, soc, contract):
    """The program sets ACLNN_CONTRACT from its argument; a phase 2 with a NULL workspace
    and a size releases the executor only under the library contract."""
    done = run_program([programs["calls"], soc, contract], env={"ACLNN_SOC": soc})
    assert done.stdout.strip().endswith("checks passed") and int(done.stdout.split()[0]) > 200


def test_many_threads_give_identical_results_and_own_messages(programs):
    done = run_program([programs["threads"], 6, 40])
    assert done.stdout.strip() == "threads 6 calls 40 identical"


def test_threads_on_numbas_workqueue_layer(programs):
    """The layer a machine without OpenMP or TBB gets aborts on concurrent launches unless
    they are serialised."""
    done = run_program([programs["threads"], 8, 12], env={"NUMBA_THREADING_LAYER": "workqueue"})
    assert done.stdout.strip() == "threads 8 calls 12 identical"


def test_a_thread_of_direct_calls_keeps_its_python_thread_state(programs):
    """shim.c's direct calls take the GIL with PyGILState_Ensure, which would make and
    delete a thread state at every call of a thread that has none."""
    assert run_program([programs["thread_state"]]).stdout == "kept\n"


@pytest.mark.parametrize("name", sdk.LINK_NAMES)
def test_dlopen_rtld_local_under_every_name(programs, sdk_prefix, name):
    done = run_program([programs["dlopen"], sdk_prefix / "lib64" / name])
    assert done.stdout == python_sample("smooth_l1_loss_backward")


def test_sample_exits_cleanly_with_the_python_samples_lines(programs):
    done = run_program([programs["sample"]])
    assert done.stdout == python_sample("smooth_l1_loss_backward") and done.stderr == ""


@pytest.mark.parametrize("breakage", ["broken numpy", "bad PYTHONHOME"])
def test_failed_start_up_fails_every_call_loudly(programs, tmp_path, breakage):
    if breakage == "broken numpy":
        (tmp_path / "numpy").mkdir()
        (tmp_path / "numpy" / "__init__.py").write_text("raise ImportError('numpy broken here')\n")
        env, cause = {"PYTHONPATH": str(tmp_path)}, "ImportError: numpy broken here"
    else:
        env, cause = {"PYTHONHOME": str(tmp_path / "none")}, "cannot start the Python interpreter"
    done = run_program([programs["no_runtime"]], env=env, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [str(START_FAILED)] * 3 + ["NULL", "561000", "NULL",
                                                                  "failed to start"]
    assert cause in done.stderr
    assert done.stderr.count("every aclnn call fails") == 1


def _host_script(sdk_prefix, body: str, one_tensor: bool = False) -> str:
    """A Python program that loads the SDK's library through ctypes (`lib`, with the
    argument types of the calls these tests make; P, U64, I64 the ctypes types), then runs
    `body` (dedented). `one_tensor`: first start the runtime from C and make `x`, a tensor
    of 8 float32 on device memory, and `size`, `executor` for phase 1's outputs."""
    prelude = textwrap.dedent(f"""
        import ctypes
        from aclnn import acl

        lib = ctypes.CDLL("{sdk_prefix}/lib64/libopapi_nn.so")
        P, U64, I64 = ctypes.c_void_p, ctypes.c_uint64, ctypes.c_int64
        lib.aclGetRecentErrMsg.restype = ctypes.c_char_p
        lib.aclCreateTensor.restype = P
        lib.aclCreateTensor.argtypes = [P, U64, ctypes.c_int, P, I64, ctypes.c_int, P, U64, P]
        lib.aclnnL1LossBackwardGetWorkspaceSize.argtypes = [P, P, P, I64, P, P, P]
        lib.aclnnL1LossBackward.argtypes = [P, U64, P, P]
        shape = (ctypes.c_int64 * 1)(8)
    """)
    if one_tensor:
        prelude += textwrap.dedent("""
            assert lib.aclInit(None) == 0 and lib.aclrtSetDevice(0) == 0
            ptr, _ = acl.rt.malloc(32, 0)
            x = lib.aclCreateTensor(shape, 1, 0, None, 0, 2, shape, 1, ptr)
            size, executor = ctypes.c_uint64(), ctypes.c_void_p()
        """)
    return prelude + textwrap.dedent(body)


def test_python_host_shares_the_runtime_and_leaks_no_handles(sdk_prefix):
    """A Python program that loads the library: C calls use the Python runtime's objects,
    and handles of destroyed objects and spent executors are released."""
    script = _host_script(sdk_prefix, """
        import numpy as np

        lib.aclrtMemcpy.argtypes = [P, ctypes.c_size_t, P, ctypes.c_size_t, ctypes.c_int]
        lib.aclDestroyTensor.argtypes = [P]
        assert lib.aclInit(None) == 0 and acl.init() == 100002   # one runtime
        assert acl.rt.set_device(0) == 0

        ptr, _ = acl.rt.malloc(32, 0)                           # Python's allocation ...
        host = np.arange(8, dtype=np.float32)
        assert lib.aclrtMemcpy(ptr, 32, host.ctypes.data, 32, 1) == 0   # ... filled from C
        assert (acl.util.ptr_to_numpy(ptr, (8,), np.float32) == host).all()

        from aclnn.capi import bridge, handles
        assert bridge.lib.ACLNN_HANDLE_MIN <= handles.BASE  # phase 1: handle or status
        baseline = bridge.objects.live_count()
        for _ in range(300):
            x = lib.aclCreateTensor(shape, 1, 0, None, 0, 2, shape, 1, ptr)
            size, executor = ctypes.c_uint64(), ctypes.c_void_p()
            out_ptr, _ = acl.rt.malloc(32, 0)
            out = lib.aclCreateTensor(shape, 1, 0, None, 0, 2, shape, 1, out_ptr)
            assert lib.aclnnL1LossBackwardGetWorkspaceSize(
                x, x, x, 9, out, ctypes.byref(size), ctypes.byref(executor)) == 161002
            assert lib.aclnnL1LossBackwardGetWorkspaceSize(
                x, x, x, 0, out, ctypes.byref(size), ctypes.byref(executor)) == 0
            assert lib.aclnnL1LossBackward(None, 0, executor, None) == 0  # spent: released
            assert acl.rt.synchronize_stream(None) == 0
            for handle in (x, out):
                assert lib.aclDestroyTensor(handle) == 0
            acl.rt.free(out_ptr)
        print("shared", bridge.objects.live_count() - baseline)
    """)
    done = run_program([sys.executable, "-c", script])
    assert done.stdout.split() == ["shared", "0"], done.stderr


def test_a_bridge_bug_in_a_direct_call_is_an_internal_error(sdk_prefix):
    """Phase 1, phase 2 and synchronize, which shim.c calls without cffi: an exception in
    the bridge, or a result that is not an int, becomes the call's internal-error status
    with the exception as the recent error message, and the next call works."""
    script = _host_script(sdk_prefix, """
        from aclnn.capi import bridge
        from aclnn.ops import l1_loss_backward

        lib.aclrtSynchronizeStream.argtypes = [P]

        def phase_one():
            return lib.aclnnL1LossBackwardGetWorkspaceSize(x, x, x, 0, x, ctypes.byref(size),
                                                           ctypes.byref(executor))

        def boom(*args):
            raise RuntimeError("boom")

        def report(status):
            print(status, lib.aclGetRecentErrMsg().decode())

        planned = l1_loss_backward.aclnnL1LossBackwardGetWorkspaceSize
        l1_loss_backward.aclnnL1LossBackwardGetWorkspaceSize = boom
        report(phase_one())
        l1_loss_backward.aclnnL1LossBackwardGetWorkspaceSize = planned
        assert phase_one() == 0
        op = bridge.lib.ACLNN_OP_L1_LOSS_BACKWARD
        phase_two, bridge._PHASE_TWO[op] = bridge._PHASE_TWO[op], lambda *args: None
        report(lib.aclnnL1LossBackward(None, 0, executor, None))
        bridge._PHASE_TWO[op] = phase_two
        assert lib.aclnnL1LossBackward(None, 0, executor, None) == 0
        synchronize, acl.rt.synchronize_stream = acl.rt.synchronize_stream, boom
        report(lib.aclrtSynchronizeStream(None))
        acl.rt.synchronize_stream = synchronize
        assert lib.aclrtSynchronizeStream(None) == 0
    """, one_tensor=True)
    done = run_program([sys.executable, "-c", script])
    assert done.stdout.splitlines() == [
        "561000 aclnn C API: internal error: RuntimeError: boom",
        "561000 aclnn C API: internal error: TypeError: an integer is required",
        "507000 aclnn C API: internal error: RuntimeError: boom"], done.stderr


def test_an_equal_beta_from_c_is_passed_as_the_same_object(sdk_prefix):
    """SmoothL1's beta from C is a new float at every call: the bridge passes one equal to
    the previous call's as that object (the plan cache then recognises the call by
    identity), never a zero (-0.0 == 0.0) or NaN."""
    script = _host_script(sdk_prefix, """
        import math
        from aclnn.ops import smooth_l1_loss_backward as op

        lib.aclnnSmoothL1LossBackwardGetWorkspaceSize.argtypes = [P, P, P, I64, ctypes.c_float,
                                                                  P, P, P]
        seen, planned = [], op.aclnnSmoothL1LossBackwardGetWorkspaceSize
        op.aclnnSmoothL1LossBackwardGetWorkspaceSize = lambda *a: seen.append(a[4]) or planned(*a)
        for beta in (1.5, 1.5, 2.5, 0.0, 0.0, -0.0, math.nan, math.nan):
            lib.aclnnSmoothL1LossBackwardGetWorkspaceSize(x, x, x, 0, beta, x, ctypes.byref(size),
                                                          ctypes.byref(executor))
        print(*(a is b for a, b in zip(seen, seen[1:])), math.copysign(1, seen[5]))
    """, one_tensor=True)
    done = run_program([sys.executable, "-c", script])
    assert done.stdout.split() == ["True"] + ["False"] * 6 + ["-1.0"], done.stderr


def test_retired_handles_are_bounded():
    from aclnn.capi.handles import ForeignHandle, HandleTable

    table = HandleTable(retired_kept=3)
    objects = [object() for _ in range(7)]
    issued = [table.add(obj) for obj in objects]
    assert len(set(issued)) == 7 and all(h % 16 == 0 for h in issued)
    for handle in issued[:6]:
        table.retire(handle)
    assert table.live_count() == 1
    assert [table.lookup(h) for h in issued[:6]] == objects[:6]  # up to twice 3: all found
    table.retire(issued[6])  # the seventh: trimmed to the last 3
    assert table.live_count() == 0
    assert [table.lookup(h) for h in issued[4:]] == objects[4:]
    assert all(isinstance(table.lookup(h), ForeignHandle) for h in issued[:4])
    assert table.lookup(0) is None
    assert "0x1234: not a live handle" in repr(table.lookup(0x1234))


def _own_errors(xml_path, objects: tuple[str, ...]) -> list[str]:
    """valgrind's access errors (not leaks) with a frame in one of `objects`, as text."""
    found = []
    for error in ElementTree.parse(xml_path).getroot().iter("error"):
        if error.findtext("kind", "").startswith("Leak_"):
            continue
        frames = error.find("stack").findall("frame")
        places = [f"{f.findtext('fn', '?')} ({f.findtext('obj', '?')})" for f in frames]
        if any(any(obj in place for obj in objects) for place in places):
            found.append(f"{error.findtext('kind')}: " + " <- ".join(places[:8]))
    return found


_CPU_PROBE = ("import llvmlite.binding as ll; print(ll.get_host_cpu_name()); "
              "print(ll.get_host_cpu_features().flatten())")


def _cpu_under_valgrind() -> dict[str, str]:
    """The CPU a program sees under valgrind (a CPU of valgrind's own, not this machine's),
    as the settings that make Numba compile for it."""
    done = subprocess.run(["valgrind", "-q", sys.executable, "-c", _CPU_PROBE],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    name, features = done.stdout.split()
    return {"NUMBA_CPU_NAME": name, "NUMBA_CPU_FEATURES": features}


@pytest.mark.slow
def test_sample_under_valgrind_has_no_invalid_access_in_our_code(programs, tmp_path):
    """memcheck over the whole run (invalid reads, writes and frees; leaks are not checked:
    the embedded interpreter keeps its memory until exit); an error counts if a frame of
    the library or the sample is on its stack (the dynamic loader has errors of its own).
    The Python sample runs first, natively, compiled for the CPU valgrind shows: Numba
    caches kernels by target, and the C sample's then come from the cache (compiled under
    valgrind instead, they took 4 of the 4.6 minutes of this test on a 2 GHz Zen 1)."""
    expected = python_sample("smooth_l1_loss_backward")
    run_program([sys.executable, "-m", "aclnn.samples.smooth_l1_loss_backward"],
                env=_cpu_under_valgrind())
    report = tmp_path / "memcheck.xml"
    done = subprocess.run(
        ["valgrind", "--tool=memcheck", "--undef-value-errors=no", "--xml=yes",
         f"--xml-file={report}", str(programs["sample"])],
        capture_output=True, text=True, timeout=900,
        env={**os.environ, "PYTHONMALLOC": "malloc"})
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout == expected
    assert _own_errors(report, (sdk.LIBRARY, str(programs["sample"]))) == []
