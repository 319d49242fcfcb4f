"""The ecosystem's accuracy metrics on the command line: `aclnn compare` prints them, `aclnn
run` reports them per case in JSON and in a CSV report that parses back to the JSON's
values (`aclnn report merge --csv` too)."""

from __future__ import annotations

import csv
import json
import math
import os
import re
import subprocess
import sys

import numpy as np

from test_cli import BASIC, SWEEP, aclnn, run_report


def test_compare_prints_the_ecosystem_metrics(tmp_path):
    """actual [1, 2, 0, 3] against golden [1, 2.002, 1e-9, -3] (float32): the metrics the
    metrics test computes by hand."""
    np.save(tmp_path / "a.npy", np.array([1, 2, 0, 3], np.float32))
    np.save(tmp_path / "g.npy", np.array([1, 2.002, 1e-9, -3]))
    done = aclnn("compare", tmp_path / "a.npy", tmp_path / "g.npy")
    assert done.returncode == 1
    cosine = (1 + 4.004 - 9) / (math.sqrt(14) * math.sqrt(1 + 2.002**2 + 1e-18 + 9))
    assert (f"ecosystem: cosine {cosine:.6f}, max abs error 6, max rel error 2, "
            "one-thousandth 50.0000%, five-thousandths 75.0000%; accuracy reached: No"
            in done.stdout), done.stdout


def _parsed(value: str, like):
    """A CSV cell read back as the JSON value it came from."""
    if value == "":
        return None
    if isinstance(like, bool):
        return value == "True"
    return type(like)(value) if isinstance(like, (int, float)) else value


def test_run_csv_has_a_row_per_case_with_the_reports_values(tmp_path):
    done, report = run_report(tmp_path, SWEEP, "--csv", tmp_path / "r.csv", "--soc",
                              "Ascend910")
    with (tmp_path / "r.csv").open(newline="") as stream:
        rows = list(csv.DictReader(stream))
    assert len(rows) == len(report["cases"]) == 300
    for row, case in zip(rows, report["cases"]):
        precision = case["precision"] or {}
        for column, value in row.items():
            source = precision if column in precision and column != "passed" else case
            if column == "reason":
                assert value == (precision.get("reason") or case["message"])
            elif column in source and source[column] is not None:
                assert _parsed(value, source[column]) == source[column], (column, row)
            else:
                assert value == "", (column, row)
    rejected = [r for r in rows if r["outcome"] == "rejected"]
    assert rejected and all(r["cosine_similarity"] == "" for r in rejected)
    assert {r["accuracy_reached"] for r in rows if r["outcome"] == "pass"} <= {"True", "False"}


def test_merge_writes_csv_too(tmp_path):
    run_report(tmp_path, BASIC, "--shard", "1/2", name="a.json")
    run_report(tmp_path, BASIC, "--shard", "2/2", name="b.json")
    done = aclnn("report", "merge", tmp_path / "a.json", tmp_path / "b.json", "-o",
                 tmp_path / "all.json", "--csv", tmp_path / "all.csv")
    merged = json.loads((tmp_path / "all.json").read_text())
    assert done.returncode == (1 if merged["summary"]["failed"] else 0)
    with (tmp_path / "all.csv").open(newline="") as stream:
        rows = list(csv.DictReader(stream))
    assert [int(r["index"]) for r in rows] == list(range(8))
    assert [r["outcome"] for r in rows] == [c["outcome"] for c in merged["cases"]]


# --- colours and the live bar (rich) ---------------------------------------------------------

def _run_with(env_extra: dict, *args) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items()
           if k not in ("ACLNN_SOC", "NO_COLOR", "FORCE_COLOR", "TERM")}
    return subprocess.run([sys.executable, "-m", "aclnn", "run", str(BASIC), *args],
                          capture_output=True, text=True, env={**env, **env_extra},
                          timeout=300)


COLOUR = re.compile(r"\x1b\[(?:3|9)\d")  # a foreground colour


def test_colours_on_a_terminal_and_none_with_no_color_or_in_a_pipe():
    """FORCE_COLOR stands for a terminal: the table's counts and the verdict are coloured;
    NO_COLOR takes the colours away; a pipe gets plain text."""
    assert COLOUR.search(_run_with({"FORCE_COLOR": "1"}).stdout)
    assert not COLOUR.search(_run_with({"FORCE_COLOR": "1", "NO_COLOR": "1"}).stdout)
    plain = _run_with({})
    assert "\x1b" not in plain.stdout and "\x1b" not in plain.stderr


def test_a_terminal_gets_the_live_bar():
    done = _run_with({"FORCE_COLOR": "1"}, "--progress")
    assert done.returncode in (0, 1), done.stderr
    assert "8/8" in done.stderr and "━" in done.stderr
    assert not re.search(r"^\[#+", done.stderr, flags=re.M)  # not the log's plain lines


def test_demo_announces_the_first_compile_only_when_the_cache_is_empty(tmp_path, monkeypatch,
                                                                     capsys):
    """No Numba index file beside the kernels nor in NUMBA_CACHE_DIR: `aclnn demo` says it
    compiles the kernels once; with one there, it says nothing of it."""
    from aclnn import kernels
    from aclnn.user import cli

    package = tmp_path / "kernels"
    (package / "__pycache__").mkdir(parents=True)
    monkeypatch.setattr(kernels, "__file__", str(package / "__init__.py"))
    monkeypatch.delenv("NUMBA_CACHE_DIR", raising=False)
    monkeypatch.setattr(cli, "SAMPLES", [])
    assert cli.cmd_demo(None) == 0
    assert "first run: compiling the kernels" in capsys.readouterr().out
    cache = tmp_path / "cache" / "sub"
    cache.mkdir(parents=True)
    (cache / "pointwise.f-1.py311.nbi").write_bytes(b"")
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path / "cache"))
    assert cli.cmd_demo(None) == 0
    assert "compiling" not in capsys.readouterr().out
