"""The `aclnn` command line: demo, run (case files), report merge, compare (dumps), info,
sdk.

Exit status: 0 success; 1 a case or a comparison failed, or a case was skipped (unless
--allow-skip); 2 bad usage or a malformed input file; 130 interrupted (Ctrl-C), after the
summary of the cases finished so far.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path

import ml_dtypes
import numpy as np
from rich.console import Console
from rich.progress import BarColumn, TextColumn, TimeElapsedColumn
from rich.progress import Progress as RichProgress
from rich.table import Table

from .. import acl
from ..acl._device import CONTRACT_ENV, CONTRACTS, SOC_ENV, SOC_NAMES
from ..capi import sdk
from ..dtypes import dtype_name
from ..framework.soc import PROFILES
from ..samples import SAMPLES
from .batch import (
    CaseLog,
    ReportError,
    RunOptions,
    build_report,
    check_same_run,
    cpu_count,
    in_shard,
    jsonl_path,
    merge_reports,
    parse_shard,
    read_report,
    run_all,
    write_csv,
    write_json,
)
from .cases import DTYPES, CaseFileError, load_cases
from .operators import OPERATORS
from .precision import compare, standard_for
from .runner import GOLDENS, available_bytes

BAR_WIDTH = 30


class Progress:
    """A progress bar on stderr: rich's live bar on a terminal; elsewhere (a log, a pipe) a
    plain line per tenth, which a log keeps readable."""

    def __init__(self, total: int, enabled: bool, stream=None):
        self.total, self.enabled, self.done = total, enabled and total > 0, 0
        self.console = Console(file=stream or sys.stderr, highlight=False)
        self._last_tenth = -1
        self._bar = None
        if self.enabled and self.console.is_terminal:
            self._bar = RichProgress(
                TextColumn("{task.completed}/{task.total}"), BarColumn(),
                TextColumn("{task.description}"), TimeElapsedColumn(), console=self.console)
            self._task = self._bar.add_task("", total=total)
            self._bar.start()

    def step(self, label: str) -> None:
        """One more item done; `label` says which."""
        self.done += 1
        if self._bar is not None:
            self._bar.update(self._task, completed=self.done, description=label)
        elif self.enabled and 10 * self.done // self.total != self._last_tenth:
            self._last_tenth = 10 * self.done // self.total
            filled = BAR_WIDTH * self.done // self.total
            self.console.print(f"[{'#' * filled}{'.' * (BAR_WIDTH - filled)}] "
                               f"{self.done}/{self.total} {label}", markup=False)

    def close(self) -> None:
        """End the bar."""
        if self._bar is not None:
            self._bar.stop()


# --- demo ---------------------------------------------------------------------------------

def _kernel_cache_is_empty() -> bool:
    """Whether Numba's cache holds none of the kernels yet (the first run compiles them)."""
    from .. import kernels

    places = [Path(kernels.__file__).parent / "__pycache__"]
    if os.environ.get("NUMBA_CACHE_DIR"):
        places.append(Path(os.environ["NUMBA_CACHE_DIR"]))
    return not any(next(place.rglob("*.nbi"), None) for place in places if place.is_dir())


def cmd_demo(args: argparse.Namespace) -> int:
    """Run the translated seed samples, each in its own interpreter, as the README does."""
    if _kernel_cache_is_empty():
        print("(first run: compiling the kernels into Numba's cache, a minute or two; later "
              "runs start in about a second)", flush=True)
    for name in SAMPLES:
        print(f"== {name}", flush=True)
        done = subprocess.run([sys.executable, "-m", f"aclnn.samples.{name}"])
        if done.returncode:
            print(f"sample {name} failed with exit status {done.returncode}", file=sys.stderr)
            return 1
    return 0


# --- run ----------------------------------------------------------------------------------

def _select_device(soc: str | None, contract: str | None) -> None:
    if soc is not None:
        os.environ[SOC_ENV] = soc
    if contract is not None:
        os.environ[CONTRACT_ENV] = contract
    acl.rt.set_device(0)


def _console() -> Console:
    """stdout through rich: colours on a terminal, none in a pipe or with NO_COLOR."""
    return Console(highlight=False, soft_wrap=True)


def _print_summary(summary: dict) -> None:
    console = _console()
    table = Table(box=None, pad_edge=False, show_edge=False, header_style="bold")
    table.add_column("operator")
    table.add_column("dtype")
    for name in ("cases", "pass", "fail", "rejected", "skipped"):
        table.add_column(name, justify="right")
    for g in summary["by_operator_dtype"]:
        rejected = g["rejected"] + g["unexpected-success"]
        table.add_row(g["operator"], g["dtype"], str(g["cases"]),
                      f"[green]{g['pass']}[/]", f"[red]{g['fail']}[/]" if g["fail"] else "0",
                      f"[red]{rejected}[/]" if rejected else "0",
                      f"[yellow]{g['skipped']}[/]" if g["skipped"] else "0")
    console.print(table)
    if summary["worst"]:
        console.print("worst precision:")
        for w in summary["worst"]:
            console.print(f"  case {w['index']} (id {w['id']!r}) {w['operator']} {w['dtype']}: "
                          f"{w['reason']}; {ecosystem_line(w)}", markup=False)
    skipped = f", {summary['skipped']} skipped" if summary["skipped"] else ""
    style = "green" if summary["passed"] == summary["cases"] else "red"
    console.print(f"{summary['passed']} of {summary['cases']} cases passed{skipped}",
                  style=style, markup=False)


def _number(value: float | None) -> str:
    """A report's number (None: not finite)."""
    return "inf" if value is None else f"{value:.3g}"


def _print_failures(rows: list[dict]) -> None:
    for r in rows:
        if r["passed"]:
            continue
        if r["outcome"] == "skipped":
            detail = r["message"]
        elif r["status"] == r["expected_status"]:
            detail = r["precision"]["reason"]
        else:
            detail = r["message"] or f"expected status {r['expected_status']}"
        print(f"{r['outcome'].upper():<9} case {r['index']} (id {r['id']!r}) "
              f"{r['operator']} {r['dtype']}: status {r['status']}: {detail}")


_SIZE_UNITS = {"": 1, "k": 2**10, "m": 2**20, "g": 2**30, "t": 2**40}


def parse_size(text: str) -> int:
    """A memory size: bytes, or a number with K, M, G or T (powers of 1024; 'B' or 'iB'
    may follow), e.g. 512M, 1.5G, 8GiB."""
    match = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*([kmgt]?)(?:i?b)?\s*", text.lower())
    if match is None or float(match[1]) <= 0:
        raise ValueError(f"--max-memory must be a positive size such as 512M or 8G, "
                         f"got {text!r}")
    return int(float(match[1]) * _SIZE_UNITS[match[2]])


def _exit_status(summary: dict, allow_skip: bool) -> int:
    if summary["failed"] or (summary["skipped"] and not allow_skip):
        return 1
    return 0


def _resumed(path: str | None, header: dict) -> list[dict]:
    """The entries of the report or log being resumed (none without --resume)."""
    if path is None:
        return []
    previous, rows = read_report(path)
    check_same_run(header, previous, path)
    return rows


def cmd_run(args: argparse.Namespace) -> int:
    """Run a case file (a shard of it, less what --resume's report holds), in worker
    processes; append each result to the report's log as it finishes; print the summary;
    write the report; exit 0 only if every case passed (or was skipped, with
    --allow-skip)."""
    try:
        cases = load_cases(args.cases)
        shard = parse_shard(args.shard) if args.shard else None
        budget = parse_size(args.max_memory) if args.max_memory else available_bytes()
        if args.jobs is not None and args.jobs < 1:
            raise ValueError(f"--jobs must be at least 1, got {args.jobs}")
    except (CaseFileError, ValueError) as exc:
        print(f"aclnn run: {args.cases}: {exc}", file=sys.stderr)
        return 2
    _select_device(args.soc, args.contract)
    header = {"cases_file": str(args.cases), "seed": args.seed, "soc": acl.get_soc_name(),
              "contract": acl.get_contract(), "golden": args.golden}
    try:
        rows = _resumed(args.resume, header)
    except ReportError as exc:
        print(f"aclnn run: --resume: {exc}", file=sys.stderr)
        return 2
    done = {row["index"] for row in rows}
    todo = [case for case in in_shard(cases, shard) if case.index not in done]
    options = RunOptions(str(args.cases), args.seed, args.golden,
                         Path(args.save_dir) if args.save_dir else None, budget)
    progress = Progress(len(todo), args.progress if args.progress is not None
                        else sys.stderr.isatty())
    status = None
    try:
        log = CaseLog(jsonl_path(args.report) if args.report else None, header, rows)
    except OSError as exc:
        print(f"aclnn run: cannot write the report's log: {exc}", file=sys.stderr)
        return 2
    try:
        for row in run_all(todo, options, args.jobs or cpu_count()):
            rows.append(row)
            log.write(row)
            progress.step(f"{row['operator']} {row['outcome']}")
    except KeyboardInterrupt:
        status = 130
        print("\naclnn run: interrupted; the cases finished so far:", file=sys.stderr)
    except CaseFileError as exc:
        print(f"\naclnn run: {args.cases}: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:  # --save-dir not writable
        print(f"\naclnn run: cannot save a case: {exc}", file=sys.stderr)
        return 2
    except BrokenProcessPool:
        kept = f" and {jsonl_path(args.report)}" if args.report else ""
        print(f"\naclnn run: a worker process died (killed for memory?); the cases "
              f"finished so far are in the summary{kept}; rerun with --resume",
              file=sys.stderr)
        status = 1
    finally:
        progress.close()
        log.close()
    report = build_report(header, rows)
    _print_failures(report["cases"])
    _print_summary(report["summary"])
    if not _write_reports("aclnn run", report, args.report, args.csv):
        return 2
    return status or _exit_status(report["summary"], args.allow_skip)


def _write_reports(command: str, report: dict, json_path: str | None,
                   csv_path: str | None) -> bool:
    """Write the JSON and the CSV report asked for; False, with a message, if one cannot
    be written."""
    for path, write in ((json_path, write_json), (csv_path, write_csv)):
        if path:
            try:
                write(path, report)
            except OSError as exc:
                print(f"{command}: cannot write {path}: {exc}", file=sys.stderr)
                return False
    return True


def cmd_report_merge(args: argparse.Namespace) -> int:
    """Join shard reports (or logs) into one report; print its summary; exit 0 only if
    every case passed."""
    try:
        report = merge_reports(args.reports)
    except ReportError as exc:
        print(f"aclnn report merge: {exc}", file=sys.stderr)
        return 2
    if not _write_reports("aclnn report merge", report, args.output, args.csv):
        return 2
    _print_summary(report["summary"])
    return _exit_status(report["summary"], args.allow_skip)


# --- compare ------------------------------------------------------------------------------

def _load_dump(path: str, dtype: np.dtype | None, shape: list[int] | None) -> np.ndarray:
    """A .npy file (a 2-byte void dtype is read as bfloat16), or a raw .bin file of
    `dtype` and `shape`."""
    if path.endswith(".npy"):
        array = np.load(path)
        return array.view(ml_dtypes.bfloat16) if array.dtype == np.dtype("V2") else array
    if dtype is None:
        raise ValueError(f"{path}: a raw dump needs --dtype")
    size = Path(path).stat().st_size
    if size % dtype.itemsize:
        raise ValueError(f"{path}: {size} bytes is not a whole number of {dtype.name} elements")
    array = np.fromfile(path, dtype=dtype)
    if shape is not None:
        if int(np.prod(shape)) != array.size:
            raise ValueError(f"{path}: {array.size} elements do not fill shape {shape}")
        array = array.reshape(shape)
    return array


def cmd_compare(args: argparse.Namespace) -> int:
    """Compare an output dump with its golden under the precision standard."""
    dtype = DTYPES[args.dtype] if args.dtype else None
    golden_dtype = DTYPES[args.golden_dtype] if args.golden_dtype else dtype
    try:
        actual = _load_dump(args.actual, dtype, args.shape)
        golden = _load_dump(args.golden, golden_dtype, args.shape)
        judged_as = dtype or actual.dtype
        standard_for(judged_as)
        if actual.size != golden.size:
            raise ValueError(f"{args.actual} has {actual.size} elements, {args.golden} "
                             f"{golden.size}")
        verdict = compare(actual.astype(judged_as), golden.reshape(actual.shape), judged_as)
    except (OSError, ValueError, EOFError) as exc:  # EOFError: an empty or cut .npy
        print(f"aclnn compare: {exc}", file=sys.stderr)
        return 2
    print(f"{'PASS' if verdict.passed else 'FAIL'}: {verdict.elements} elements as "
          f"{np.dtype(judged_as).name}; {verdict.ok_fraction:.4%} within tolerance; "
          f"max abs error {verdict.max_abs_error:.6g}, max rel error "
          f"{verdict.max_rel_error:.6g}; {verdict.reason}")
    if verdict.worst_index is not None and verdict.elements:
        print(f"worst element {verdict.worst_index}: actual {verdict.worst_actual!r}, "
              f"golden {verdict.worst_golden!r}")
    print(ecosystem_line(verdict.to_json()))
    return 0 if verdict.passed else 1


def _ratio(value: float | None) -> str:
    return "N/A" if value is None else f"{value:.4%}"


def ecosystem_line(precision: dict) -> str:
    """The ecosystem's metrics of a verdict (its JSON form) on one line, as msprobe and the
    PyTorch accuracy comparison name them."""
    cosine = precision["cosine_similarity"]
    return (f"ecosystem: cosine {'N/A' if cosine is None else f'{cosine:.6f}'}, "
            f"max abs error {_number(precision['max_abs_error'])}, max rel error "
            f"{_number(precision['max_rel_error'])}, one-thousandth "
            f"{_ratio(precision['one_thousandth_ratio'])}, five-thousandths "
            f"{_ratio(precision['five_thousandths_ratio'])}; accuracy reached: "
            f"{'Yes' if precision['accuracy_reached'] else 'No'}")


# --- info ---------------------------------------------------------------------------------

def cmd_info(args: argparse.Namespace) -> int:
    """SoC profiles, operators, and the dtypes each SoC supports."""
    _select_device(None, None)  # the SoC and contract the environment selects
    print(f"current SoC: {acl.get_soc_name()} (set with {SOC_ENV})")
    print(f"contract: {acl.get_contract()} (set with {CONTRACT_ENV}: {' or '.join(CONTRACTS)}; "
          "library answers as the real CANN library does, documented as its pages say)")
    print("SoC profiles:")
    for profile in PROFILES.values():
        dtypes = ", ".join(dtype_name(d) for d in profile.float_dtypes())
        print(f"  {profile.name:<13} {profile.series}: dtypes {dtypes}; "
              f"AvgPool2dBackward FLOAT: "
              f"{'native' if profile.cube_fp32 else 'needs cubeMathType 1 or 2'}, "
              f"ALLOW_FP32_DOWN_PRECISION rounds to {profile.down_precision}")
    print("operators:")
    for op in OPERATORS.values():
        attrs = ", ".join(f"{k}={v!r}" for k, v in op.defaults.items())
        print(f"  aclnn{op.name}({', '.join(op.tensors)}; {attrs})")
    print("L1LossBackward also takes integer and bool inputs that promote to a float dtype.")
    return 0


# --- sdk ----------------------------------------------------------------------------------

def cmd_sdk(args: argparse.Namespace) -> int:
    """Build the C SDK if it is missing or stale; print its prefix, flags or environment."""
    try:
        prefix = sdk.ensure()
    except sdk.SdkError as exc:
        print(f"aclnn sdk: {exc}", file=sys.stderr)
        return 2
    if args.env:
        print(sdk.environment(prefix), end="")
    flags = (sdk.cflags(prefix) if args.cflags else []) + (sdk.libs(prefix) if args.libs else [])
    if flags:
        print(" ".join(flags))
    if args.prefix or not (args.env or flags):
        print(prefix)
    return 0


# --- the parser ---------------------------------------------------------------------------

def _add_allow_skip(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--allow-skip", action="store_true", help="exit 0 when every case "
                        "that ran passed, even if some were skipped")


def build_parser() -> argparse.ArgumentParser:
    """The `aclnn` argument parser with its subcommands."""
    parser = argparse.ArgumentParser(
        prog="aclnn", description="The CANN aclnn operators on any machine: run the seed "
        "samples, run case files against a float64 golden, compare dumps.")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    demo = sub.add_parser("demo", help="run the translated seed samples",
                          description="Run the four seed samples (SmoothL1LossBackward, "
                          "L1LossBackward, GeluBackwardV2, AvgPool2dBackward); they print "
                          "their results.")
    demo.set_defaults(func=cmd_demo)
    run = sub.add_parser("run", help="run a case file and judge every case",
                         description="Run a JSON case file (CANN operator test kit layout): "
                         "generate inputs, run the operator, compare with a float64 golden "
                         "under the precision standard. Exit status 0 only if every case "
                         "passes.")
    run.add_argument("cases", help="the JSON case file")
    run.add_argument("--soc", choices=SOC_NAMES, help="the SoC to emulate "
                     "(default: $ACLNN_SOC or Ascend910B)")
    run.add_argument("--contract", choices=CONTRACTS, help="answer as the real library "
                     "(library) or as its pages (documented); default: $ACLNN_CONTRACT or "
                     "library")
    run.add_argument("--golden", choices=GOLDENS, default="truth", help="truth: the float64 "
                     "truth of the operator's math (default); device: the library contract's "
                     "own result, to diff hardware output bit for bit")
    run.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    run.add_argument("--report", metavar="R.json", help="write a JSON report here (each "
                     "case is also appended to R.jsonl as it finishes)")
    run.add_argument("--csv", metavar="R.csv", help="write a CSV report here: a row per "
                     "case with its outcome and precision metrics")
    run.add_argument("--save-dir", metavar="D", help="save each case's inputs, output and "
                     "golden as .npy under D")
    run.add_argument("--max-memory", metavar="SIZE", help="the memory a case may use "
                     "(e.g. 8G; default: what the machine has available); a case needing "
                     "more is skipped, and the run goes on")
    _add_allow_skip(run)
    run.add_argument("-j", "--jobs", type=int, metavar="N", help="run cases in N worker "
                     "processes (default: the number of CPUs; results and report order do "
                     "not depend on it)")
    run.add_argument("--resume", metavar="REPORT", help="leave out the cases this report "
                     "(or its .jsonl log, of a run that did not finish) holds, and keep "
                     "its results")
    run.add_argument("--shard", metavar="I/N", help="run shard I of N: every N-th case "
                     "from the I-th; join the shards' reports with `aclnn report merge`")
    run.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                     help="show a progress bar (default: when stderr is a terminal)")
    run.set_defaults(func=cmd_run)
    report = sub.add_parser("report", help="work with run reports",
                            description="Work with the reports of `aclnn run`.")
    report_sub = report.add_subparsers(dest="action", required=True, metavar="ACTION")
    merge = report_sub.add_parser("merge", help="join shard reports into one",
                                  description="Join the reports (or .jsonl logs) of the "
                                  "shards of one run into one report, cases in file order.")
    merge.add_argument("reports", nargs="+", metavar="REPORT")
    merge.add_argument("-o", "--output", required=True, metavar="ALL.json",
                       help="where to write the joined report")
    merge.add_argument("--csv", metavar="ALL.csv", help="also write the joined report as "
                       "CSV, a row per case")
    _add_allow_skip(merge)
    merge.set_defaults(func=cmd_report_merge)
    cmp = sub.add_parser("compare", help="compare an output dump with a golden dump",
                         description="Compare ACTUAL with GOLDEN (.npy, or raw .bin with "
                         "--dtype and --shape) under the precision standard of ACTUAL's "
                         "dtype. Exit status 0 if it passes.")
    cmp.add_argument("actual")
    cmp.add_argument("golden")
    cmp.add_argument("--dtype", choices=sorted(DTYPES), help="dtype of raw .bin dumps and "
                     "of the standard applied")
    cmp.add_argument("--golden-dtype", choices=sorted(DTYPES),
                     help="dtype of a raw golden .bin (default: --dtype)")
    cmp.add_argument("--shape", type=int, nargs="+", help="shape of raw .bin dumps")
    cmp.set_defaults(func=cmd_compare)
    info = sub.add_parser("info", help="SoC profiles, operators and dtypes",
                          description="Print the SoC profiles, the operators and the dtypes "
                          "each SoC supports.")
    info.set_defaults(func=cmd_info)
    c_sdk = sub.add_parser(
        "sdk", help="the C SDK: headers and libraries for C/C++ programs",
        description="Build the C SDK on first use (CANN-toolkit layout: include/, lib64/ with "
        "libascendcl.so, libnnopbase.so, libopapi.so, ..., set_env.sh, aclnn.pc, a CMake "
        f"package) in ${sdk.PREFIX_ENV} or the environment's share/aclnn-sdk, then print what "
        "is asked: g++ sample.cpp $(aclnn sdk --cflags --libs)")
    c_sdk.add_argument("--prefix", action="store_true", help="print the SDK's directory "
                       "(the default)")
    c_sdk.add_argument("--cflags", action="store_true", help="print the compiler flags")
    c_sdk.add_argument("--libs", action="store_true", help="print the linker flags (with an "
                       "rpath, so programs run without LD_LIBRARY_PATH)")
    c_sdk.add_argument("--env", action="store_true", help="print the export lines of "
                       "set_env.sh, for eval \"$(aclnn sdk --env)\"")
    c_sdk.set_defaults(func=cmd_sdk)
    return parser


def main(argv: list[str] | None = None) -> int:
    """The console entry point."""
    args = build_parser().parse_args(argv)
    return args.func(args)
