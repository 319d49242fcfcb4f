"""Command line, run loop, table printer and JSON writer of ``python -m benchmarks``."""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
import traceback
from pathlib import Path

import numba
import numpy as np
import torch
from rich import box
from rich.console import Console
from rich.table import Table

from . import isa
from .cases import (
    CASES,
    PROBES,
    TRIAD,
    Case,
    note_bandwidth_ceilings,
    note_compute_floors,
    note_staging_bounds,
    note_subnormal_costs,
)
from .harness import Config, OthersLoad, Row, clear_host_cache, init_runtime

THREADS = 2
DEFAULT_JSON = Path(__file__).resolve().parent / "results.json"


def parse_args(argv=None) -> argparse.Namespace:
    """The command-line options."""
    ap = argparse.ArgumentParser(
        prog="python -m benchmarks",
        description="Time the aclnn operators against PyTorch CPU (out= variants) and a Numba "
                    "bandwidth probe; print one table with PASS/FAIL per target.")
    ap.add_argument("--quick", action="store_true",
                    help="smoke run: 1M elements, small pools, 3 repeats")
    ap.add_argument("--repeat", type=int, default=None,
                    help="timed repetitions per case, median reported (default 7; 3 if --quick)")
    ap.add_argument("--only", metavar="SUBSTRING", default=None,
                    help="run only the cases whose name contains SUBSTRING (case-insensitive); "
                         "cases a target compares with are added")
    ap.add_argument("--json", metavar="PATH", type=Path, default=DEFAULT_JSON,
                    help=f"where to write the results (default {DEFAULT_JSON}; another level "
                         "than the native one adds its name: results-avx2.json)")
    ap.add_argument("--isa", default=None, metavar="LEVEL",
                    help=f"run one instruction-set level only (this machine: "
                         f"{', '.join(isa.levels())}; default: each in turn)")
    return ap.parse_args(argv)


def _run_level(level: str, argv: list[str]) -> int:
    """`python -m benchmarks` with `argv` in a process of its own, compiled for `level`
    (its environment: Numba's target, PyTorch's dispatch); its exit status."""
    command = [sys.executable, "-m", "benchmarks", *argv]
    return subprocess.run(command, env={**os.environ, **isa.ENVIRONMENTS.get(level, {})}
                          ).returncode


def _in_environment(level: str) -> bool:
    """Whether this process was started in `level`'s environment (the native level has
    none of its own)."""
    return all(os.environ.get(k) == v for k, v in isa.ENVIRONMENTS.get(level, {}).items())


def _other_levels(args: argparse.Namespace, argv) -> int:
    """Run the levels other than the native one, each in a process of its own compiled for
    it; the worst exit status."""
    status = 0
    for level in isa.levels()[1:]:
        json_path = args.json.with_name(f"{args.json.stem}-{level}{args.json.suffix}")
        print(f"\n== instruction-set level {level}", flush=True)
        status = max(status, _run_level(level, [*argv, "--isa", level,
                                                "--json", str(json_path)]))
    return status


def select(only: str | None) -> list[Case]:
    """The cases matching `only` plus the ones their targets need, in registry order."""
    if not only:
        return list(CASES)
    names = {c.name for c in CASES if only.lower() in c.name.lower()}
    names |= {need for c in CASES if c.name in names for need in c.target.needs}
    return [c for c in CASES if c.name in names]


def run_case(case: Case, cfg: Config) -> Row:
    """Measure one case; a failure becomes a row with an ERROR note."""
    print(f"  {case.name} ...", file=sys.stderr, flush=True)
    try:
        return case.measure(case, cfg)
    except Exception as exc:  # keep going: one broken case must not hide the others
        traceback.print_exc(file=sys.stderr)
        return Row(case.name, note=f"ERROR {type(exc).__name__}: {exc}"[:200])


def judge(rows: list[Row], cases: list[Case]) -> None:
    """Fill each row's verdict (PASS/FAIL/n/a) and detail from its case's target."""
    by_name = {r.case: r for r in rows}
    for case in cases:
        row = by_name[case.name]
        if case.target is None:
            continue
        ok, detail = case.target.check(row, by_name)
        row.verdict = "n/a" if ok is None else ("PASS" if ok else "FAIL")
        row.detail = detail


def _fmt(value, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def _ms(seconds) -> str:
    if seconds is None:
        return "-"
    ms = seconds * 1e3
    return f"{ms:.4f}" if ms < 1 else f"{ms:.2f}"


COLUMNS = ("case", "isa", "ours (ms)", "torch (ms)", "torch/ours", "our GB/s", "x triad",
           "target")
_VERDICT_STYLE = {"PASS": "green", "FAIL": "bold red"}


def table(rows: list[Row], level: str) -> Table:
    """The result table (rich); `level`: the instruction-set level it ran on."""
    result = Table(box=box.SIMPLE_HEAD, pad_edge=False, header_style="bold")
    for i, name in enumerate(COLUMNS):
        result.add_column(name, justify="left" if i == 0 else "right", no_wrap=i == 0)
    for r in rows:
        verdict = r.verdict or ""
        result.add_row(r.case, level, _ms(r.ours_s), _ms(r.torch_s), _fmt(r.ratio, ".2f"),
                       _fmt(r.gbps, ".1f"), _fmt(r.triad_fraction, ".2f"),
                       f"[{_VERDICT_STYLE[verdict]}]{verdict}[/]" if verdict in _VERDICT_STYLE
                       else verdict)
    return result


def _console() -> Console:
    """stdout through rich: colours on a terminal; in a pipe or a log no colours and a
    width that fits the table."""
    console = Console(highlight=False)
    if not console.is_terminal:
        console.width = 160
    return console


def verdict_lines(rows: list[Row], cases: list[Case]) -> list[str]:
    """One line per target (PASS/FAIL/n/a), then the notes of rows that have one."""
    by_name = {r.case: r for r in rows}
    out = [f"{by_name[c.name].verdict:4}  {c.name}: target {c.target.text} -> "
           f"{by_name[c.name].detail}" for c in cases if c.target is not None]
    out += [f"note  {r.case}: {r.note}" for r in rows if r.note]
    return out


def main(argv=None) -> int:
    """Run the selected cases, print the table and the verdicts, write the JSON file."""
    argv = sys.argv[1:] if argv is None else list(argv)  # passed on to the other levels
    args = parse_args(argv)
    if args.isa is not None and args.isa not in isa.levels():
        print(f"--isa {args.isa}: this machine runs {', '.join(isa.levels())}", file=sys.stderr)
        return 2
    if args.isa is not None and not _in_environment(args.isa):
        return _run_level(args.isa, argv)  # compiled for it, not for the native level
    level = args.isa or isa.native_level()
    status = 0 if args.isa else _other_levels(args, argv)
    repeat = args.repeat if args.repeat is not None else (3 if args.quick else 7)
    cfg = Config(quick=args.quick, repeat=max(1, repeat))
    torch.set_num_threads(THREADS)
    numba.set_num_threads(THREADS)
    init_runtime()
    cases = select(args.only)
    if not cases:
        print(f"no case matches {args.only!r}", file=sys.stderr)
        return 2

    others = OthersLoad()
    started = time.perf_counter()
    rows = []
    for case in PROBES + cases:
        rows.append(run_case(case, cfg))
        if case.name != TRIAD:   # the triad arrays are kept for nothing; others are freed
            clear_host_cache()
    triad = next(r for r in rows if r.case == TRIAD).gbps
    for row in rows:
        row.triad_gbps = triad
    judge(rows, cases)
    note_bandwidth_ceilings(rows, cases)
    note_compute_floors(rows, cases)
    note_subnormal_costs(rows, cases)
    note_staging_bounds(rows)
    elapsed = time.perf_counter() - started
    busy = others.fraction()

    mode = "quick (sizes reduced: verdicts indicative only)" if cfg.quick else "full"
    print(f"\naclnn benchmarks: {mode}, median of {cfg.repeat} after {cfg.warmup} warm-up; "
          f"torch {torch.__version__} ({torch.get_num_threads()} threads), numba "
          f"{numba.__version__} ({numba.get_num_threads()} threads), n = {cfg.n:,} elements; "
          f"instruction-set level {level}")
    _console().print(table(rows, level))
    print("\n".join(verdict_lines(rows, cases)))
    print(f"({elapsed:.0f} s; other processes used {_fmt(busy, '.0%')} of the CPUs meanwhile)")
    if (busy or 0) > 0.1:
        print("WARNING: other processes were using the CPUs; 2-thread kernels lose whole "
              "time slices then - rerun on a quiet machine before trusting the verdicts")

    payload = {
        "meta": {"mode": mode, "repeat": cfg.repeat, "warmup": cfg.warmup, "n": cfg.n,
                 "pool_shape": cfg.pool_shape, "torch": torch.__version__,
                 "numba": numba.__version__, "numpy": np.__version__, "threads": THREADS,
                 "python": platform.python_version(), "machine": platform.machine(),
                 "isa": level,
                 "triad_gbps": triad, "seconds": elapsed,
                 "others_cpu_fraction": busy,
                 "time": time.strftime("%Y-%m-%dT%H:%M:%S%z")},
        "rows": [{"case": r.case, "ours_ms": None if r.ours_s is None else r.ours_s * 1e3,
                  "torch_ms": None if r.torch_s is None else r.torch_s * 1e3,
                  "ratio_torch_over_ours": r.ratio, "bytes_moved": r.bytes_moved,
                  "elements": r.elements, "our_gbps": r.gbps, "triad_fraction": r.triad_fraction,
                  "target": next((c.target.text for c in cases
                                  if c.name == r.case and c.target), None),
                  "verdict": r.verdict or None, "detail": r.detail or None,
                  "note": r.note or None, "extra": r.extra} for r in rows],
    }
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(payload, indent=2) + "\n")
    print(f"wrote {args.json}")
    return status
