"""Running case files: each case's inputs drawn, the operator called, the golden computed
and the precision standard applied a slice of the output at a time; a case that cannot
fit in the memory budget is skipped with the reason; the summary of the results.

Memory of a case: its inputs and output in their dtypes, the device golden when asked
for, and a bounded float64 slice (`GOLDEN_ELEMENTS`) for the golden and its comparison,
plus `RESERVE` for the kernels' staging, the interpreter and the libraries.
"""

from __future__ import annotations

import math
import re
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .. import acl
from ..framework.status import AclnnError
from .cases import Case, draw_inputs, dtype_label
from .precision import Tally, Verdict

GOLDEN_ELEMENTS = 1 << 21  # output elements per golden slice (float64 temporaries ~16 MiB)
RESERVE = 300 << 20  # bytes: the golden slice's temporaries, kernels' staging, libraries


@dataclass
class CaseResult:
    """The outcome of one case."""

    case: Case
    dtype: str
    shapes: dict[str, list[int]]
    attrs: dict[str, Any]
    status: int
    message: str
    verdict: Verdict | None
    seconds: float

    skipped: str = ""  # why the case did not run (it would not fit in memory)

    @property
    def passed(self) -> bool:
        """Ran, returned the expected status and, when it succeeded, met the standard."""
        return not self.skipped and self.status == self.case.expected_status and (
            self.verdict is None or self.verdict.passed)

    @property
    def outcome(self) -> str:
        """pass, fail (precision), rejected (a status other than the expected one),
        unexpected-success or skipped."""
        if self.skipped:
            return "skipped"
        if self.passed:
            return "pass"
        if self.status != self.case.expected_status:
            return "rejected" if self.status else "unexpected-success"
        return "fail"

    def to_json(self) -> dict:
        """The result as JSON-ready values."""
        return {
            "index": self.case.index, "id": self.case.id, "operator": self.case.op.name,
            "dtype": self.dtype, "shapes": self.shapes, "attrs": self.attrs,
            "status": self.status, "expected_status": self.case.expected_status,
            "message": self.skipped or self.message, "outcome": self.outcome,
            "passed": self.passed,
            "precision": self.verdict.to_json() if self.verdict else None,
            "seconds": round(self.seconds, 6),
        }


def _json_attr(value):
    return [_json_attr(v) for v in value] if isinstance(value, (list, tuple)) else (
        None if isinstance(value, float) and not np.isfinite(value) else value)


def _save(directory: Path, case: Case, arrays: dict, output, golden) -> None:
    name = re.sub(r"[^A-Za-z0-9_.-]", "_", str(case.id))
    folder = directory / f"case_{case.index:04d}_{name}"
    folder.mkdir(parents=True, exist_ok=True)
    for tensor, array in arrays.items():
        np.save(folder / f"{tensor}.npy", array)
    if output is not None:
        np.save(folder / "output.npy", np.asarray(output))
        np.save(folder / "golden.npy", golden)


GOLDENS = ("truth", "device")


def _device_result(case: Case, arrays: dict, attrs: dict) -> np.ndarray:
    """The library contract's result of the call (the device-faithful one), whatever the
    current contract."""
    previous = acl.get_contract()
    acl.set_contract("library")
    try:
        return np.asarray(case.op.call(arrays, attrs))
    finally:
        acl.set_contract(previous)


def row_slices(shape: tuple[int, ...], elements: int = GOLDEN_ELEMENTS) -> Iterator[slice]:
    """Slices along the first dim of an output of `shape`, each of at most `elements`
    elements (one row at least); the whole output when it has no dims."""
    if not shape:
        yield slice(None)
        return
    step = max(1, elements // max(1, math.prod(shape[1:])))
    for first in range(0, shape[0], step):
        yield slice(first, min(first + step, shape[0]))


def _judge(output: np.ndarray, golden_rows: Callable[[slice], np.ndarray]) -> Verdict:
    """The output against its golden, computed (`golden_rows` of a slice of rows) and
    compared a slice of rows at a time."""
    tally = Tally(output.dtype, output.shape)
    row_size = math.prod(output.shape[1:]) if output.ndim else 1
    for rows in row_slices(output.shape):
        part = output[rows] if output.ndim else output
        tally.add(part.reshape(-1), golden_rows(rows).reshape(-1), (rows.start or 0) * row_size)
    return tally.verdict()


def case_bytes(case: Case, golden_kind: str = "truth", saving: bool = False) -> int:
    """The memory a case needs at its peak (see the module's docstring); `saving`: the
    whole float64 golden is kept, to be saved."""
    shapes = {name: spec.shape for name, spec in case.tensors.items()}
    inputs = sum(math.prod(spec.shape) * spec.dtype.itemsize for spec in case.tensors.values())
    itemsize = max(spec.dtype.itemsize for spec in case.tensors.values())
    elements = math.prod(case.op.out_shape(shapes))
    golden = elements * (max(itemsize, 4) if golden_kind == "device" else 8 if saving else 0)
    return inputs + elements * max(itemsize, 4) + golden + 8 * 4 * GOLDEN_ELEMENTS + RESERVE


def available_bytes() -> int:
    """The memory this process may still use: the system's available memory, within the
    cgroup's limit where one is set."""
    fields = dict(line.split(":", 1) for line in Path("/proc/meminfo").read_text().splitlines())
    free = int(fields["MemAvailable"].split()[0]) * 1024
    limit, used = Path("/sys/fs/cgroup/memory.max"), Path("/sys/fs/cgroup/memory.current")
    if limit.exists() and used.exists() and limit.read_text().strip() != "max":
        free = min(free, int(limit.read_text()) - int(used.read_text()))
    return free


def _skip(case: Case, needed: int, budget: int) -> CaseResult:
    """The result of a case too large for the budget."""
    reason = (f"skipped: needs about {needed / 2**30:.2f} GiB, the memory budget is "
              f"{budget / 2**30:.2f} GiB (raise it with --max-memory)")
    return CaseResult(case, dtype_label(next(iter(case.tensors.values())).dtype),
                      {k: list(v.shape) for k, v in case.tensors.items()}, {}, 0, "", None,
                      0.0, reason)


def run_case(case: Case, seed: int, save_dir: Path | None = None,
             golden_kind: str = "truth", budget: int | None = None) -> CaseResult:
    """Draw the case's inputs (seeded by `seed` and the case's position), run the
    operator, and judge its output against the golden: the float64 truth of the
    operator's math, or with `golden_kind` "device" the library contract's result. A case
    needing more than `budget` bytes (see `case_bytes`; default: the memory available) is
    skipped."""
    needed = case_bytes(case, golden_kind, save_dir is not None)
    budget = available_bytes() if budget is None else budget
    if needed > budget:
        return _skip(case, needed, budget)
    start = time.perf_counter()
    arrays, attrs = draw_inputs(case, np.random.default_rng([seed, case.index]))
    output = golden = verdict = None
    status, message = 0, ""
    try:
        output = case.op.call(arrays, attrs)
    except AclnnError as exc:
        status, message = exc.status, exc.message
    if output is not None:
        output = np.asarray(output)
        if golden_kind == "device":
            golden = _device_result(case, arrays, attrs)
        elif save_dir is not None:
            golden = case.op.golden(arrays, attrs, slice(None))
        verdict = _judge(output, (lambda rows: case.op.golden(arrays, attrs, rows))
                         if golden is None else (lambda rows: golden[rows] if golden.ndim
                                                 else golden))
    first = arrays[case.op.tensors[0]]
    dtype = dtype_label(output.dtype if output is not None else first.dtype)
    if save_dir is not None:
        _save(save_dir, case, arrays, output, golden)
    return CaseResult(case, dtype, {k: list(v.shape) for k, v in arrays.items()},
                      {k: _json_attr(v) for k, v in attrs.items()}, status, message, verdict,
                      time.perf_counter() - start)


def _or_inf(value: float | None) -> float:
    """A report's error value: None stands for a non-finite one."""
    return math.inf if value is None else value


WORST_FIELDS = ("max_abs_error", "max_rel_error", "cosine_similarity", "one_thousandth_ratio",
                "five_thousandths_ratio", "accuracy_reached", "passed", "reason")
OUTCOMES = ("pass", "fail", "rejected", "unexpected-success", "skipped")


def summarize(rows: Iterable[dict]) -> dict:
    """Counts per operator and dtype, overall counts, and the worst precision results, of
    the cases' report entries (`CaseResult.to_json`)."""
    rows = list(rows)
    groups: dict[tuple[str, str], dict[str, int]] = defaultdict(
        lambda: {"cases": 0, **dict.fromkeys(OUTCOMES, 0)})
    for r in rows:
        group = groups[(r["operator"], r["dtype"])]
        group["cases"] += 1
        group[r["outcome"]] += 1
    judged = [r for r in rows if r["precision"] and r["precision"]["elements"]]
    worst = sorted(judged, key=lambda r: (r["precision"]["passed"],
                                          -_or_inf(r["precision"]["max_rel_error"])))[:5]
    return {
        "cases": len(rows), "passed": sum(r["passed"] for r in rows),
        "failed": sum(not r["passed"] and r["outcome"] != "skipped" for r in rows),
        "skipped": sum(r["outcome"] == "skipped" for r in rows),
        "by_operator_dtype": [{"operator": op, "dtype": dt, **counts}
                              for (op, dt), counts in sorted(groups.items())],
        "worst": [{"index": r["index"], "id": r["id"], "operator": r["operator"],
                   "dtype": r["dtype"], **{k: r["precision"][k] for k in WORST_FIELDS}}
                  for r in worst],
    }

