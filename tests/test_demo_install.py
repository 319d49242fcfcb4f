"""`make demo` on a fresh virtual environment installs the runtime dependencies only (no
PyTorch, no test tools) and prints the samples' results."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
TEST_ONLY = ("torch", "pytest", "hypothesis", "mpmath", "ruff")


@pytest.mark.slow
def test_make_demo_in_a_fresh_venv_installs_no_test_extras(tmp_path):
    venv = tmp_path / "venv"
    done = subprocess.run(["make", "-s", "demo", f"VENV={venv}", f"PYTHON={sys.executable}"],
                          cwd=REPO, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "== smooth_l1_loss_backward" in done.stdout or "result[0] is" in done.stdout
    assert "the same lines as the Python sample" in done.stdout
    listed = subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "list",
                             "--format=freeze"], capture_output=True, text=True, check=True)
    installed = {line.split("==")[0].lower() for line in listed.stdout.splitlines()}
    assert {"numpy", "numba", "ml_dtypes", "cffi", "aclnn"} <= installed, installed
    assert not installed & set(TEST_ONLY), installed & set(TEST_ONLY)
