"""`aclnn run` at scale, run as a user runs it (the console script in a subprocess): cases
too large for the memory budget skipped while the run goes on, peak memory within its
bound, worker processes giving the results of one process, a log that survives a killed
run, --resume, Ctrl-C, shards and `aclnn report merge`."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path

import pytest

from aclnn import acl
from aclnn.user import batch, runner
from aclnn.user.cases import load_cases
from test_cli import BASIC, SWEEP, aclnn, attr, l1_case, run_report, strict_json, tensor
from test_cli import write_cases as _write

PEAK_SCRIPT = """
import resource, subprocess, sys
done = subprocess.run(sys.argv[1:], capture_output=True, text=True)
print(done.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
sys.stderr.write(done.stdout + done.stderr)
"""


def _timeless(entries: list[dict]) -> list[dict]:
    """Case entries without their timings (the one thing that differs between runs)."""
    return [{k: v for k, v in entry.items() if k != "seconds"} for entry in entries]


def _gelu_case(case_id, shape, dtype="fp32"):
    return {"id": case_id, "aclnn_name": "GeluBackwardV2",
            "inputs": [tensor("gradOutput", dtype, shape, [-2, 2]),
                       tensor("self", dtype, shape, [-8, 8]),
                       attr("approximate", "string", "none")]}


# --- the memory budget ---------------------------------------------------------------------

def test_a_case_past_the_budget_is_skipped_and_the_run_goes_on(tmp_path):
    """A case of 8.1e9 elements (once found by fuzzing: drawing it got the process killed)
    is skipped with what it needs and the budget; the cases around it run. Exit status 1
    for the skip, 0 with --allow-skip."""
    cases = [l1_case(0), _gelu_case(1, [300, 300, 300, 300]), l1_case(2)]
    file = _write(tmp_path / "big.json", cases)
    done, report = run_report(tmp_path, file, "--max-memory", "2G")
    assert done.returncode == 1, done.stderr
    assert [c["outcome"] for c in report["cases"]] == ["pass", "skipped", "pass"]
    skipped = report["cases"][1]
    assert not skipped["passed"] and skipped["precision"] is None
    # two float32 inputs and the output, the golden's float64 slice and the reserve
    needed = 3 * 4 * 300**4 + 8 * 4 * (1 << 21) + (300 << 20)
    assert (f"needs about {needed / 2**30:.2f} GiB, the memory budget is 2.00 GiB"
            in skipped["message"])
    assert report["summary"]["skipped"] == 1 and report["summary"]["failed"] == 0
    assert "2 of 3 cases passed, 1 skipped" in done.stdout
    assert "SKIPPED   case 1 (id 1) GeluBackwardV2 fp32" in done.stdout
    done, _ = run_report(tmp_path, file, "--max-memory", "2G", "--allow-skip")
    assert done.returncode == 0, done.stdout


@pytest.mark.parametrize("golden, saving, golden_bytes", [
    ("truth", False, 0), ("device", False, 4), ("truth", True, 8), ("device", True, 4)])
def test_the_estimate_counts_data_golden_slice_and_reserve(golden, saving, golden_bytes):
    """float16 gradOutput [1, 7] and self [5, 7]: inputs 2 x (7 + 35) bytes, the output of
    35 elements counted at 4 bytes, the device golden as the output or the saved float64
    golden (none when the golden is computed a slice at a time), the 64 MiB float64 slice
    and the 300 MiB reserve."""
    case = load_cases(BASIC)[4]
    assert case.op.name == "GeluBackwardV2"
    expected = 2 * (7 + 35) + 4 * 35 + golden_bytes * 35 + 64 * 2**20 + 300 * 2**20
    assert runner.case_bytes(case, golden, saving) == expected


def test_the_default_budget_is_the_memory_available(tmp_path):
    """No element limit and no option: the same huge case is skipped against the memory
    this machine has (which no 24 GiB machine holds 60 GiB of)."""
    done, report = run_report(tmp_path, _write(tmp_path / "c.json", [_gelu_case(
        0, [300, 300, 300, 300])]))
    assert done.returncode == 1
    assert report["cases"][0]["outcome"] == "skipped"


@pytest.mark.parametrize("size", ["0", "-1G", "lots", "1X"])
def test_a_bad_memory_size_exits_2(tmp_path, size):
    done = aclnn("run", BASIC, f"--max-memory={size}")
    assert done.returncode == 2
    assert "--max-memory must be a positive size" in done.stderr and repr(size) in done.stderr


def test_peak_memory_stays_within_three_times_the_data(tmp_path):
    """Peak RSS of a run whose case has 2 x 24M float32 inputs and a 24M output (288 MiB
    of data): at most 3 x that + 300 MiB, golden and comparison done a slice at a time."""
    elements = 24 << 20
    file = _write(tmp_path / "large.json", [_gelu_case(0, [elements // 4096, 4096])])
    peak = subprocess.run([sys.executable, "-c", PEAK_SCRIPT, sys.executable, "-m", "aclnn",
                           "run", str(file), "-j", "1"], capture_output=True, text=True,
                          timeout=600)
    status, kib = map(int, peak.stdout.split())
    assert status == 0, peak.stderr
    data = 3 * 4 * elements
    assert kib * 1024 <= 3 * data + (300 << 20), (kib / 1024, peak.stderr)


# --- worker processes -----------------------------------------------------------------------

def test_jobs_give_the_results_and_order_of_one_process(monkeypatch):
    """The sweep's 300 cases in 2 worker processes (sent there whatever their size) give
    the entries of one process, in file order; and the CLI's -j 2 the same report."""
    acl.rt.set_device(0)
    cases = load_cases(SWEEP)
    options = batch.RunOptions(str(SWEEP), 0, "truth", None, 8 << 30)
    here = list(batch.run_all(cases, options, 1))
    monkeypatch.setattr(batch, "WORKER_ELEMENTS", 0)
    spawned = []
    real = batch._run_in_workers
    monkeypatch.setattr(batch, "_run_in_workers", lambda *args: spawned.append(args[2]) or
                        real(*args))
    workers = list(batch.run_all(cases, options, 2))
    assert spawned == [2]
    assert [e["index"] for e in workers] == list(range(300))
    assert _timeless(workers) == _timeless(here)


def test_small_files_run_in_one_process(monkeypatch):
    """A file of fewer than WORKER_ELEMENTS elements does not start workers (they take
    longer to start than its cases take)."""
    monkeypatch.setattr(batch, "_run_in_workers", lambda *args: pytest.fail("workers"))
    acl.rt.set_device(0)
    options = batch.RunOptions(str(BASIC), 0, "truth", None, 8 << 30)
    assert len(list(batch.run_all(load_cases(BASIC), options, 2))) == 8


def test_a_worker_that_dies_raises_rather_than_hangs(tmp_path, monkeypatch):
    """Workers that cannot start (here the case file is gone when they read it) break the
    pool: run_all raises BrokenProcessPool, which `aclnn run` reports, instead of waiting
    for results that never come."""
    file = _write(tmp_path / "gone.json", [l1_case(i) for i in range(4)])
    cases = load_cases(file)
    file.unlink()
    monkeypatch.setattr(batch, "WORKER_ELEMENTS", 0)
    options = batch.RunOptions(str(file), 0, "truth", None, 8 << 30)
    with pytest.raises(BrokenProcessPool):
        list(batch.run_all(cases, options, 2))


@pytest.mark.parametrize("jobs", ["0", "-2"])
def test_jobs_below_one_exit_2(jobs):
    done = aclnn("run", BASIC, "-j", jobs)
    assert done.returncode == 2 and "--jobs must be at least 1" in done.stderr


# --- the log, a killed run, --resume, Ctrl-C -------------------------------------------------

def _slow_cases(count: int) -> list[dict]:
    """Cases that take a while each (4M-element GELU), so a run can be stopped mid-way."""
    return [_gelu_case(i, [1024, 4096]) for i in range(count)]


def _start(args: list, tmp_path: Path) -> subprocess.Popen:
    """`aclnn run` with `args`, in the background, with SIGINT handled as a user's shell
    leaves it, whatever this process inherited: a suite started as a background job by a
    shell without job control (`bash .ci/run &`) ignores SIGINT, an ignored signal stays
    ignored across exec, and Python then installs no KeyboardInterrupt handler (the Ctrl-C
    test failed so, exit status 0). A handled one is reset to its default at exec, so it is
    handled here while the run starts (no `preexec_fn`: not safe with threads about)."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        return subprocess.Popen([sys.executable, "-m", "aclnn", "run", *map(str, args)],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                cwd=tmp_path)
    finally:
        signal.signal(signal.SIGINT, previous)


def _wait_for_lines(log: Path, count: int, process: subprocess.Popen) -> None:
    """Wait until the log holds `count` lines (the header and count - 1 cases)."""
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and process.poll() is None:
        if log.exists() and log.read_text().count("\n") >= count:
            return
        time.sleep(0.05)
    pytest.fail(f"the log did not reach {count} lines: {process.communicate()}")


def test_a_killed_run_keeps_its_finished_cases_and_resumes(tmp_path):
    """SIGKILL mid-run (as the OOM killer does): the .jsonl log holds a header and every
    finished case; --resume from it runs only the others, and the final report equals an
    uninterrupted run's."""
    file = _write(tmp_path / "slow.json", _slow_cases(8))
    report, log = tmp_path / "r.json", tmp_path / "r.jsonl"
    process = _start([file, "--report", report, "-j", "1"], tmp_path)
    _wait_for_lines(log, 3, process)
    process.send_signal(signal.SIGKILL)
    process.communicate()
    assert not report.exists()
    lines = [json.loads(line) for line in log.read_text().splitlines() if line.endswith("}")]
    header, finished = lines[0], lines[1:]
    assert header["cases_file"] == str(file) and header["seed"] == 0
    assert 2 <= len(finished) < 8
    assert [c["index"] for c in finished] == list(range(len(finished)))
    done = aclnn("run", file, "--report", report, "--resume", log, "--progress")
    assert done.returncode == 0, done.stderr
    assert f"] {8 - len(finished)}/{8 - len(finished)}" in done.stderr  # only the rest ran
    resumed = strict_json(report.read_text())
    _, whole = run_report(tmp_path, file, name="whole.json")
    assert _timeless(resumed["cases"]) == _timeless(whole["cases"])
    assert resumed["summary"] == whole["summary"]


def test_ctrl_c_prints_the_summary_so_far_and_exits_130(tmp_path):
    file = _write(tmp_path / "slow.json", _slow_cases(8))
    report, log = tmp_path / "r.json", tmp_path / "r.jsonl"
    process = _start([file, "--report", report], tmp_path)
    _wait_for_lines(log, 2, process)
    process.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=120)
    assert process.returncode == 130, err
    assert "interrupted" in err and "Traceback" not in err
    written = strict_json(report.read_text())
    assert 1 <= len(written["cases"]) < 8
    assert f"{len(written['cases'])} of {len(written['cases'])} cases passed" in out


def test_resume_refuses_a_report_of_another_run(tmp_path):
    _, _ = run_report(tmp_path, BASIC)
    done = aclnn("run", BASIC, "--seed", "1", "--resume", tmp_path / "report.json")
    assert done.returncode == 2
    assert "seed 0 instead of 1" in done.stderr


def test_resume_refuses_what_is_not_a_report(tmp_path):
    done = aclnn("run", BASIC, "--resume", BASIC)
    assert done.returncode == 2 and "not an aclnn run report" in done.stderr


# --- shards and merging ------------------------------------------------------------------------

def test_shards_merge_to_the_unsharded_report(tmp_path):
    _, whole = run_report(tmp_path, SWEEP, name="whole.json")
    parts = []
    for index in (1, 2, 3):
        done, part = run_report(tmp_path, SWEEP, "--shard", f"{index}/3",
                                name=f"part{index}.json")
        assert done.returncode == 0
        assert [c["index"] % 3 for c in part["cases"]] == [index - 1] * len(part["cases"])
        parts.append(tmp_path / f"part{index}.json")
    merged = tmp_path / "all.json"
    done = aclnn("report", "merge", *parts, "-o", merged)
    assert done.returncode == 0, done.stderr
    joined = strict_json(merged.read_text())
    assert _timeless(joined["cases"]) == _timeless(whole["cases"])
    assert joined["summary"] == whole["summary"]
    assert "300 of 300 cases passed" in done.stdout


@pytest.mark.parametrize("shard", ["0/2", "3/2", "1", "a/b"])
def test_a_bad_shard_exits_2(shard):
    done = aclnn("run", BASIC, "--shard", shard)
    assert done.returncode == 2 and "--shard" in done.stderr


def test_merge_refuses_reports_of_different_runs(tmp_path):
    run_report(tmp_path, BASIC, name="a.json")
    run_report(tmp_path, BASIC, "--seed", "5", name="b.json")
    done = aclnn("report", "merge", tmp_path / "a.json", tmp_path / "b.json", "-o",
                 tmp_path / "all.json")
    assert done.returncode == 2
    assert "seed 5 instead of 0" in done.stderr
    assert not (tmp_path / "all.json").exists()


def test_cases_past_a_workers_share_run_here_afterwards(monkeypatch):
    """With 2 jobs each worker gets half the budget: a case needing more than that (but
    not more than the budget) is kept out of the workers and run in this process, with the
    whole budget; every case still gets its entry."""
    acl.rt.set_device(0)
    cases = load_cases(BASIC)
    needs = [runner.case_bytes(c) for c in cases]
    budget = 2 * min(needs) + (max(needs) - min(needs)) // 2  # between the two halves
    big = {c.index for c, need in zip(cases, needs) if need > budget // 2}
    assert big and len(big) < len(cases)
    monkeypatch.setattr(batch, "WORKER_ELEMENTS", 0)
    sent = []
    monkeypatch.setattr(batch, "_run_in_workers", lambda chosen, options, jobs: (
        sent.extend(c.index for c in chosen) or batch._run_here(chosen, options)))
    options = batch.RunOptions(str(BASIC), 0, "truth", None, budget)
    entries = list(batch.run_all(cases, options, 2))
    assert set(sent) == {c.index for c in cases} - big
    assert sorted(e["index"] for e in entries) == list(range(len(cases)))
    assert all(e["outcome"] != "skipped" for e in entries)
