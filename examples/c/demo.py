"""The C++ samples next to the Python ones (`make demo` runs this after `aclnn demo`).

Builds each C++ sample of this folder the way the README says, with
`g++ sample.cpp $(aclnn sdk --cflags --libs)`, runs it and prints its lines beside a
verdict on whether they are the Python sample's. Where the CANN operator pages are
there (../shared/seeds), their own C++ samples are extracted unchanged, built and run
the same way.

    python examples/c/demo.py [--build-dir DIR] [--seeds DIR]
"""

from __future__ import annotations

import argparse
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
SEEDS = ROOT.parent / "shared" / "seeds"
#: C++ sample -> the Python sample printing the same lines (module of aclnn.samples)
SAMPLES = {
    "smooth_l1_loss_backward.cpp": "smooth_l1_loss_backward",
    "l1_loss_backward.cpp": "l1_loss_backward",
    "gelu_backward_v2.cpp": "gelu_backward_v2",
    "avgpool2d_backward.cpp": "avg_pool2d_backward",
}
#: the operator header a page's sample includes -> the Python sample of that operator
PAGE_OPERATORS = {
    "aclnn_smooth_l1_loss_backward.h": "smooth_l1_loss_backward",
    "aclnn_l1_loss_backward.h": "l1_loss_backward",
    "aclnn_gelu_backward_v2.h": "gelu_backward_v2",
    "aclnn_avgpool2d_backward.h": "avg_pool2d_backward",
}
GELU_PAGE_NOTE = ("the page fills its FLOAT tensors from std::vector<int>, so its gradOutput "
                  "is 1.4e-45 and it prints zeros")


def page_sample(text: str) -> str | None:
    """A page's C++ sample, unchanged: from its first #include to the brace closing
    main(); None if the page has none."""
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith("#include")), None)
    if start is None:
        return None
    depth, in_main = 0, False
    for i in range(start, len(lines)):
        in_main = in_main or lines[i].startswith("int main(")
        depth += lines[i].count("{") - lines[i].count("}")
        if in_main and depth == 0 and "}" in lines[i]:
            return "\n".join(lines[start : i + 1]) + "\n"
    return None


def page_samples(seeds: Path) -> dict[str, tuple[str, str]]:
    """{page file name: (Python sample module, C++ code)} for every seed page with a
    sample."""
    found = {}
    for page in sorted(seeds.glob("*.txt")):
        code = page_sample(page.read_text(encoding="utf-8"))
        header = re.search(r'#include "aclnnop/(aclnn_\w+\.h)"', code or "")
        if header and header.group(1) in PAGE_OPERATORS:
            found[page.name] = (PAGE_OPERATORS[header.group(1)], code)
    return found


def sdk_flags() -> list[str]:
    """`aclnn sdk --cflags --libs` (building the SDK on first use)."""
    aclnn = shutil.which("aclnn", path=str(Path(sys.executable).parent)) or "aclnn"
    done = subprocess.run([aclnn, "sdk", "--cflags", "--libs"], capture_output=True, text=True,
                          check=True)
    return shlex.split(done.stdout)


def build(source: Path, program: Path, flags: list[str]) -> None:
    """g++ SOURCE $(aclnn sdk --cflags --libs), with this folder's sample_common.h at hand."""
    subprocess.run(["g++", "-std=c++11", "-w", str(source), f"-I{HERE}", *flags, "-o",
                    str(program)], check=True)


def run(command: list[str]) -> str:
    """A program's standard output; CalledProcessError if it fails."""
    return subprocess.run(command, capture_output=True, text=True, check=True).stdout


def python_lines(module: str) -> str:
    """What the Python sample prints."""
    return run([sys.executable, "-m", f"aclnn.samples.{module}"])


def main(argv: list[str] | None = None) -> int:
    """Build and run every C++ sample; 1 if one prints other lines than its Python twin."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build-dir", type=Path, default=ROOT / "build" / "demo-c")
    parser.add_argument("--seeds", type=Path, default=SEEDS)
    args = parser.parse_args(argv)
    args.build_dir.mkdir(parents=True, exist_ok=True)
    flags = sdk_flags()
    expected = {module: python_lines(module) for module in SAMPLES.values()}
    differ = 0
    for source, module in SAMPLES.items():
        program = args.build_dir / Path(source).stem
        build(HERE / source, program, flags)
        lines = run([str(program)])
        same = lines == expected[module]
        differ += not same
        print(f"== C++ examples/c/{source}: "
              f"{'the same lines as' if same else 'NOT the lines of'} the Python sample")
        print(lines, end="", flush=True)
    pages = page_samples(args.seeds) if args.seeds.is_dir() else {}
    for name, (module, code) in pages.items():
        source = args.build_dir / f"page_{Path(name).stem}.cpp"
        source.write_text(code)
        build(source, source.with_suffix(""), flags)
        lines = run([str(source.with_suffix(""))])
        if module == "gelu_backward_v2":
            same = all(line.endswith(" is: 0.000000") for line in lines.splitlines())
            verdict = f"{'all' if same else 'NOT all'} zeros: {GELU_PAGE_NOTE}"
        else:
            same = lines == expected[module]
            verdict = f"{'the same' if same else 'NOT the'} lines as the Python sample"
        differ += not same
        print(f"== the page's own C++ sample ({name}), built unchanged: "
              f"{len(lines.splitlines())} lines, {verdict}")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
