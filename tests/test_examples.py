"""The translated seed samples (aclnn.samples) run as scripts and print the documented
results."""

import math
import re
import subprocess
import sys

import pytest

LINE = re.compile(r"^(?:out )?result\[(\d+)\] is: (-?\d+\.\d{6})$")


def run_sample(name: str) -> list[float]:
    """Run `python -m aclnn.samples.<name>` and return the printed results, checking their
    indices."""
    done = subprocess.run([sys.executable, "-m", f"aclnn.samples.{name}"], capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    values = []
    for i, line in enumerate(lines):
        match = LINE.match(line)
        assert match, f"unexpected line {line!r}"
        assert int(match.group(1)) == i
        values.append(float(match.group(2)))
    return values


def test_smooth_l1_sample_prints_the_documented_results():
    assert run_sample("smooth_l1_loss_backward") == [-1, 0, 1, 1, 1, 1, 1, 1]


def test_l1_sample_prints_sign_over_numel():
    expected = [math.copysign(1, x - 1) / 8 if x != 1 else 0.0 for x in range(8)]
    assert run_sample("l1_loss_backward") == pytest.approx(expected, abs=1e-6)


def _gelu_tanh_grad(x: float) -> float:
    k = math.sqrt(2 / math.pi)
    t = math.tanh(k * (x + 0.044715 * x**3))
    return 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * k * (1 + 3 * 0.044715 * x * x)


def test_gelu_sample_prints_the_tanh_gradient():
    expected = [round(_gelu_tanh_grad(x), 6) for x in range(8)]
    assert run_sample("gelu_backward_v2") == pytest.approx(expected, abs=1.5e-6)


def test_avg_pool_sample_prints_256_sixteenths():
    assert run_sample("avg_pool2d_backward") == [0.0625] * 256
