"""Running a whole case file: a shard of it, the cases a report already holds left out,
in worker processes, each result appended to a JSON Lines log as it finishes; reports
written atomically and merged.

A case's data depends only on the seed and its position in the file, so a shard, a
resumed run or a worker process computes exactly what a plain run does; the report lists
the cases in file order whatever order they finished in.
"""

from __future__ import annotations

import csv
import json
import math
import multiprocessing
import os
import signal
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from .cases import Case, load_cases
from .runner import case_bytes, run_case, summarize

HEADER_KEYS = ("cases_file", "seed", "soc", "contract", "golden")
WORKER_ELEMENTS = 1 << 24  # a file's elements from which its cases go to worker processes


class ReportError(ValueError):
    """A report that cannot be read, or reports that do not belong together."""


@dataclass(frozen=True)
class RunOptions:
    """What every case of a run shares."""

    cases_file: str
    seed: int
    golden: str
    save_dir: Path | None
    budget: int


def parse_shard(text: str) -> tuple[int, int]:
    """'I/N' (1 <= I <= N) as (I, N)."""
    try:
        index, count = (int(part) for part in text.split("/"))
    except ValueError:
        raise ValueError(f"--shard must be I/N (e.g. 1/4), got {text!r}") from None
    if not 1 <= index <= count:
        raise ValueError(f"--shard I/N needs 1 <= I <= N, got {text!r}")
    return index, count


def in_shard(cases: list[Case], shard: tuple[int, int] | None) -> list[Case]:
    """The cases of shard I of N: every N-th case from the I-th (positions from 1), so
    large and small cases spread over the shards alike."""
    if shard is None:
        return cases
    index, count = shard
    return [case for case in cases if case.index % count == index - 1]


def jsonl_path(report: str | Path) -> Path:
    """Where the log of a report's cases goes: beside it, with the suffix .jsonl."""
    return Path(report).with_suffix(".jsonl")


def read_report(path: str | Path) -> tuple[dict, list[dict]]:
    """(header, case entries) of a report: its final JSON, or the JSON Lines log of a run
    that did not finish (a header line, then a line per case; a line cut by a crash is
    left out)."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ReportError(f"cannot read {path}: {exc.strerror}") from None
    if str(path).endswith(".jsonl"):
        lines = []
        for line in text.splitlines():
            try:
                lines.append(json.loads(line))
            except ValueError:
                continue  # the last line of a killed run may be cut short
        if not lines or "cases_file" not in lines[0]:
            raise ReportError(f"{path}: not a case log (no header line)")
        return lines[0], lines[1:]
    try:
        report = json.loads(text)
        return {k: report[k] for k in HEADER_KEYS}, list(report["cases"])
    except (ValueError, KeyError, TypeError):
        raise ReportError(f"{path}: not an aclnn run report") from None


def check_same_run(header: dict, other: dict, where: str) -> None:
    """Reports belong together when their case file, seed, SoC, contract and golden are
    the same (the case data and the judgement are then the same)."""
    differing = [k for k in HEADER_KEYS if header.get(k) != other.get(k)]
    if differing:
        raise ReportError(f"{where} is of another run: " + ", ".join(
            f"{k} {other.get(k)!r} instead of {header.get(k)!r}" for k in differing))


def build_report(header: dict, rows: Iterable[dict]) -> dict:
    """The report: the header, the summary and the cases in file order (one per index)."""
    ordered = sorted({row["index"]: row for row in rows}.values(), key=lambda r: r["index"])
    return {**header, "summary": summarize(ordered), "cases": ordered}


def _write_atomically(path: str | Path, write: Callable[[TextIO], object]) -> None:
    """`write` the file at `path` through a partial file renamed over it: readers see the
    old file or the new one, never half of one."""
    path = Path(path)
    partial = path.with_name(path.name + ".partial")
    with partial.open("w", newline="", encoding="utf-8") as stream:
        write(stream)
    os.replace(partial, path)


def write_json(path: str | Path, document: dict) -> None:
    """Write `document` to `path` as JSON, atomically."""
    _write_atomically(path, lambda stream: json.dump(document, stream, indent=2,
                                                     allow_nan=False))


CSV_COLUMNS = ("index", "id", "operator", "dtype", "outcome", "passed", "status",
               "expected_status", "elements", "ok_fraction", "max_abs_error", "max_rel_error",
               "cosine_similarity", "one_thousandth_ratio", "five_thousandths_ratio",
               "accuracy_reached", "reason", "seconds")


def _csv_row(entry: dict) -> dict:
    """A case's report entry as a CSV row: the precision fields flattened (empty where the
    case has none or a metric is N/A), the reason of a verdict or else the message."""
    precision = entry["precision"] or {}
    row = {**{k: entry[k] for k in CSV_COLUMNS if k in entry},
           **{k: precision.get(k) for k in CSV_COLUMNS if k in precision}}
    row["reason"] = precision.get("reason") or entry["message"]
    return {k: "" if row.get(k) is None else row[k] for k in CSV_COLUMNS}


def write_csv(path: str | Path, report: dict) -> None:
    """The report's cases as CSV, one row per case (see CSV_COLUMNS), written atomically."""
    def write(stream: TextIO) -> None:
        writer = csv.DictWriter(stream, CSV_COLUMNS)
        writer.writeheader()
        writer.writerows(_csv_row(entry) for entry in report["cases"])
    _write_atomically(path, write)


def merge_reports(paths: list[str]) -> dict:
    """One report of the shard reports (or logs) `paths`: their cases, in file order."""
    header, rows = read_report(paths[0])
    for path in paths[1:]:
        other, more = read_report(path)
        check_same_run(header, other, str(path))
        rows += more
    return build_report(header, rows)


class CaseLog:
    """The JSON Lines log of a run: a header line, then each case's entry as it finishes,
    flushed, so a run that is killed keeps every finished case."""

    def __init__(self, path: Path | None, header: dict, resumed: list[dict]):
        self.stream = None
        if path is not None:
            self.stream = path.open("w", encoding="utf-8")
            for entry in (header, *resumed):
                self.write(entry)

    def write(self, entry: dict) -> None:
        """Append one line."""
        if self.stream is not None:
            self.stream.write(json.dumps(entry, allow_nan=False) + "\n")
            self.stream.flush()

    def close(self) -> None:
        """Close the log."""
        if self.stream is not None:
            self.stream.close()


# --- worker processes ------------------------------------------------------------------

_WORKER: dict = {}


def _start_worker(options: RunOptions) -> None:
    """A worker process: the case file read once; Ctrl-C is the parent's to handle."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    from .. import acl

    acl.rt.set_device(0)  # the SoC and contract the parent put in the environment
    _WORKER["cases"] = {case.index: case for case in load_cases(options.cases_file)}
    _WORKER["options"] = options


def _entry(case: Case, options: RunOptions) -> dict:
    """Run one case; its report entry."""
    return run_case(case, options.seed, options.save_dir, options.golden,
                    options.budget).to_json()


def _run_in_worker(index: int) -> dict:
    return _entry(_WORKER["cases"][index], _WORKER["options"])


def _run_here(cases: list[Case], options: RunOptions) -> Iterator[dict]:
    for case in cases:
        yield _entry(case, options)


def _run_in_workers(cases: list[Case], options: RunOptions, jobs: int) -> Iterator[dict]:
    """The cases' entries from `jobs` worker processes, in the order given; each worker
    has the budget divided by `jobs` and the CPUs divided among the workers. A worker that
    dies (killed for memory, say) raises BrokenProcessPool here rather than hanging; the
    workers are stopped when the caller stops early (Ctrl-C)."""
    share = RunOptions(options.cases_file, options.seed, options.golden, options.save_dir,
                       options.budget // jobs)
    threads = os.environ.get("NUMBA_NUM_THREADS")
    os.environ["NUMBA_NUM_THREADS"] = str(max(1, cpu_count() // jobs))
    try:
        executor = ProcessPoolExecutor(jobs, multiprocessing.get_context("spawn"),
                                       _start_worker, (share,))
        results = executor.map(_run_in_worker, [case.index for case in cases])
    finally:
        if threads is None:
            del os.environ["NUMBA_NUM_THREADS"]
        else:
            os.environ["NUMBA_NUM_THREADS"] = threads
    finished = False
    try:
        yield from results
        finished = True
    finally:
        if not finished:
            for process in list(getattr(executor, "_processes", {}).values()):
                process.terminate()
        executor.shutdown(wait=True, cancel_futures=True)


def cpu_count() -> int:
    """The CPUs this process may run on."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (
        os.cpu_count() or 1)


def _elements(case: Case) -> int:
    return sum(math.prod(spec.shape) for spec in case.tensors.values())


def run_all(cases: list[Case], options: RunOptions, jobs: int) -> Iterator[dict]:
    """Every case's report entry. With more than one job, the cases that fit in a worker's
    share of the budget run in worker processes; the larger ones then run here, one at a
    time, with the whole budget (those past it are skipped). Cases holding fewer than
    WORKER_ELEMENTS elements in all run here: a worker takes about a second to start
    (the interpreter, the package, the compiled kernels from Numba's cache), more than
    such cases take (examples/cases/sweep.json: 300 cases, 2M elements, 0.45 s)."""
    if jobs <= 1 or len(cases) <= 1 or sum(map(_elements, cases)) < WORKER_ELEMENTS:
        yield from _run_here(cases, options)
        return
    share, saving = options.budget // jobs, options.save_dir is not None
    fits = [case_bytes(c, options.golden, saving) <= share for c in cases]
    if any(fits):
        yield from _run_in_workers([c for c, f in zip(cases, fits) if f], options, jobs)
    yield from _run_here([c for c, f in zip(cases, fits) if not f], options)

