"""The C++ samples (examples/c) and the CANN pages' own samples, built as a user builds
them - `g++ sample.cpp $(aclnn sdk --cflags --libs)` (examples/c/demo.py, what `make demo`
runs), the pages' style of CMakeLists after `eval "$(aclnn sdk --env)"`, pkg-config,
CMake's find_package - print the lines the Python samples print."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from capi_support import SAMPLES, SEEDS, python_sample, run_program

_spec = importlib.util.spec_from_file_location("c_demo", SAMPLES / "demo.py")
demo = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(demo)


def shell(script: str, prefix: Path, cwd: Path) -> subprocess.CompletedProcess:
    """`script` in bash as a user types it: the venv's `aclnn` on PATH, the session SDK."""
    env = {**os.environ, "ACLNN_SDK_HOME": str(prefix),
           "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    done = subprocess.run(["bash", "-ec", script], capture_output=True, text=True, env=env,
                          cwd=cwd, timeout=600)
    assert done.returncode == 0, f"{script}\n{done.stdout}\n{done.stderr}"
    return done


def test_demo_builds_every_sample_with_gpp_and_each_prints_the_python_lines(sdk_prefix,
                                                                             tmp_path):
    done = shell(f"{sys.executable} {SAMPLES / 'demo.py'} --build-dir {tmp_path}", sdk_prefix,
                 tmp_path)
    verdicts = [line for line in done.stdout.splitlines() if line.startswith("== ")]
    assert len(verdicts) == len(demo.SAMPLES) + len(demo.page_samples(SEEDS))
    assert all("the same lines as the Python sample" in v or "all zeros" in v for v in verdicts)
    for module in demo.SAMPLES.values():
        assert python_sample(module) in done.stdout, module


def test_cmake_route_of_the_pages(sdk_prefix, tmp_path):
    """examples/c's CMakeLists builds every sample beside it: ours, and the pages' own
    copied there unchanged, as a user would."""
    source = tmp_path / "samples"
    shutil.copytree(SAMPLES, source, ignore=shutil.ignore_patterns("*.py"))
    pages = demo.page_samples(SEEDS)
    for name, (_, code) in pages.items():
        (source / f"page_{Path(name).stem}.cpp").write_text(code)
    shell(f'eval "$(aclnn sdk --env)"; cmake -S {source} -B build -DCMAKE_BUILD_TYPE=Release'
          " >/dev/null; cmake --build build >/dev/null", sdk_prefix, tmp_path)
    expected = {Path(cpp).stem: python_sample(module) for cpp, module in demo.SAMPLES.items()}
    expected.update({f"page_{Path(name).stem}": gelu_page_lines() if module == "gelu_backward_v2"
                     else python_sample(module) for name, (module, _) in pages.items()})
    for program, lines in expected.items():
        assert run_program([tmp_path / "build" / program]).stdout == lines, program


def gelu_page_lines() -> str:
    """What the GELU page's sample must print: its gradOutput is std::vector<int> of ones
    read as FLOAT (1.4e-45 each), times GELU'(x) (tanh form) at x = 0..7, in float64."""
    grad = np.ones(8, np.int32).view(np.float32).astype(np.float64)
    x = np.arange(8, dtype=np.float64)
    inner = np.sqrt(2 / np.pi) * (x + 0.044715 * x**3)
    t = np.tanh(inner)
    slope = 0.5 * (1 + t) + 0.5 * x * (1 - t**2) * np.sqrt(2 / np.pi) * (1 + 3 * 0.044715 * x**2)
    return "".join(f"result[{i}] is: {v:f}\n" for i, v in enumerate(grad * slope))


def test_pkg_config_route(sdk_prefix, tmp_path):
    shell(f'eval "$(aclnn sdk --env)"; g++ {SAMPLES / "l1_loss_backward.cpp"} '
          f"$(pkg-config --cflags --libs aclnn) -o {tmp_path / 'l1'}", sdk_prefix, tmp_path)
    assert run_program([tmp_path / "l1"]).stdout == python_sample("l1_loss_backward")


def test_cmake_find_package_route(sdk_prefix, tmp_path):
    (tmp_path / "CMakeLists.txt").write_text(
        "cmake_minimum_required(VERSION 3.14)\nproject(uses_aclnn CXX)\n"
        "find_package(aclnn 0.1 REQUIRED)\n"
        f"add_executable(gelu {SAMPLES / 'gelu_backward_v2.cpp'})\n"
        "target_link_libraries(gelu PRIVATE aclnn::aclnn)\n")
    shell('eval "$(aclnn sdk --env)"; cmake -S . -B build >/dev/null; cmake --build build'
          " >/dev/null", sdk_prefix, tmp_path)
    assert run_program([tmp_path / "build" / "gelu"]).stdout == python_sample("gelu_backward_v2")


def test_page_sample_extraction():
    page = ("说明\n#include <iostream>\n#include \"aclnnop/aclnn_l1_loss_backward.h\"\n"
            "int f() {\n  return 0;\n}\nint main() {\n  if (1) {\n    f();\n  }\n"
            "  return 0;\n}\n搜索结果\n}\n")
    assert demo.page_sample(page) == ("#include <iostream>\n#include \"aclnnop/aclnn_l1_loss_"
                                      "backward.h\"\nint f() {\n  return 0;\n}\nint main() {\n"
                                      "  if (1) {\n    f();\n  }\n  return 0;\n}\n")
    assert demo.page_sample("no code here\n") is None


def test_every_page_with_a_sample_is_found():
    if not SEEDS.is_dir():
        pytest.skip("the CANN pages (../shared/seeds) are not beside this checkout")
    found = demo.page_samples(SEEDS)
    assert sorted(module for module, _ in found.values()) == [
        "avg_pool2d_backward", "gelu_backward_v2", "smooth_l1_loss_backward",
        "smooth_l1_loss_backward"]
    for module, code in found.values():
        assert code.startswith("#include <iostream>") and "int main()" in code, module
        assert code.rstrip().endswith("}"), module
