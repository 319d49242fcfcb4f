"""Running case files: each case's inputs drawn, the operator called, the golden computed
and the precision standard applied; the summary and the JSON report."""

from __future__ import annotations

import re
import time
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .. import acl
from ..framework.status import AclnnError
from .cases import Case, draw_inputs, dtype_label
from .precision import Verdict, compare


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

    @property
    def passed(self) -> bool:
        """Returned the expected status and, when it succeeded, met the standard."""
        return self.status == self.case.expected_status and (
            self.verdict is None or self.verdict.passed)

    @property
    def outcome(self) -> str:
        """pass, fail (precision), rejected (a status other than the expected one) or
        unexpected-success."""
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
            "message": self.message, "outcome": self.outcome, "passed": self.passed,
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


def run_case(case: Case, seed: int, save_dir: Path | None = None,
             golden_kind: str = "truth") -> CaseResult:
    """Draw the case's inputs (seeded by `seed` and the case's position), run the
    operator, and judge its output against the golden: the float64 truth of the
    operator's math, or with `golden_kind` "device" the library contract's result."""
    start = time.perf_counter()
    arrays, attrs = draw_inputs(case, np.random.default_rng([seed, case.index]))
    output = golden = verdict = None
    status, message = 0, ""
    try:
        output = case.op.call(arrays, attrs)
    except AclnnError as exc:
        status, message = exc.status, exc.message
    if output is not None:
        if golden_kind == "device":
            golden = _device_result(case, arrays, attrs)
            verdict = compare(output, golden.astype(np.float64))
        else:
            golden = case.op.golden(arrays, attrs)
            verdict = compare(output, golden)
    first = arrays[case.op.tensors[0]]
    dtype = dtype_label(output.dtype if output is not None else first.dtype)
    if save_dir is not None:
        _save(save_dir, case, arrays, output, golden)
    return CaseResult(case, dtype, {k: list(v.shape) for k, v in arrays.items()},
                      {k: _json_attr(v) for k, v in attrs.items()}, status, message, verdict,
                      time.perf_counter() - start)


def summarize(results: list[CaseResult]) -> dict:
    """Counts per operator and dtype, overall counts, and the worst precision results."""
    groups: dict[tuple[str, str], dict[str, int]] = defaultdict(
        lambda: {"cases": 0, "pass": 0, "fail": 0, "rejected": 0, "unexpected-success": 0})
    for r in results:
        group = groups[(r.case.op.name, r.dtype)]
        group["cases"] += 1
        group[r.outcome] += 1
    judged = [r for r in results if r.verdict is not None and r.verdict.elements]
    worst = sorted(judged, key=lambda r: (r.verdict.passed, -r.verdict.max_rel_error))[:5]
    return {
        "cases": len(results), "passed": sum(r.passed for r in results),
        "failed": sum(not r.passed for r in results),
        "by_operator_dtype": [{"operator": op, "dtype": dt, **counts}
                              for (op, dt), counts in sorted(groups.items())],
        "worst": [{"index": r.case.index, "id": r.case.id, "operator": r.case.op.name,
                   "dtype": r.dtype, "max_abs_error": r.verdict.max_abs_error,
                   "max_rel_error": r.verdict.max_rel_error, "passed": r.verdict.passed,
                   "reason": r.verdict.reason} for r in worst],
    }
