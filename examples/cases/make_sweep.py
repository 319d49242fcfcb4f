"""Write sweep.json: a few hundred cases of all four operators, in fp32/fp16/bf16, with
broadcast shapes up to rank 8, special values and assorted attributes.

    python examples/cases/make_sweep.py [PATH]   # default: examples/cases/sweep.json
"""

import json
import random
import sys
from pathlib import Path

DTYPES = ("fp32", "fp16", "bf16")
VALUES = ([-2, 2], [-100, 100], [-1e-3, 1e-3], {"name": "nd", "mean": [-1, 1], "std": [0.1, 3]},
          ["nan"], ["inf"], ["-inf"], ["nan", "inf", "-inf", 0, 1.5], 0)


def tensor(name, dtype, shape, values):
    return {"name": name, "type": "tensor", "dtype": dtype, "shape": shape,
            "range_values": values}


def attr(name, dtype, value):
    return {"name": name, "type": "attr", "dtype": dtype, "range_values": value}


def attrs(name, values):
    return [{"name": name, "type": "attrs", "dtype": "int", "range_values": v} for v in values]


def broadcast_shapes(rng, count):
    """`count` shapes that broadcast together, rank 0..8."""
    rank = rng.choice([0, 1, 2, 3, 4, 8, rng.randint(1, 8)])
    full = [rng.choice([1, 2, 3, 5, 7]) for _ in range(rank)]
    shapes = []
    for _ in range(count):
        keep = rng.randint(0, rank)
        shapes.append([d if rng.random() < 0.6 else 1 for d in full[rank - keep:]])
    shapes[rng.randrange(count)] = full  # one operand has the full shape
    return shapes


def pointwise(rng, op, dtype, first):
    names = (first, "self", "target") if op != "GeluBackwardV2" else (first, "self")
    shapes = broadcast_shapes(rng, len(names))
    inputs = [tensor(n, dtype, s, rng.choice(VALUES) if n != first else [-2, 2])
              for n, s in zip(names, shapes)]
    if op == "GeluBackwardV2":
        inputs.append(attr("approximate", "string", rng.choice(["none", "tanh"])))
    else:
        inputs.append(attr("reduction", "int", rng.choice([0, 1, 2])))
    if op == "SmoothL1LossBackward":
        inputs.append(attr("beta", "float32", rng.choice([0.0, 0.5, 1.0, 2.0])))
    return inputs


def pooled(size, k, s, p, ceil):
    span = size + 2 * p - k
    out = (-(-span // s) if ceil else span // s) + 1
    if ceil and (out - 1) * s >= size + p:
        out -= 1
    return out


def avg_pool(rng, dtype):
    k, s = rng.choice([1, 2, 3]), rng.choice([1, 2, 3])
    p = rng.randint(0, k // 2)
    ceil = rng.random() < 0.3
    n, c, h, w = rng.randint(1, 3), rng.randint(1, 4), rng.randint(k, 12), rng.randint(k, 12)
    oh, ow = pooled(h, k, s, p, ceil), pooled(w, k, s, p, ceil)
    lead = [n, c] if rng.random() < 0.7 else [c]
    return [tensor("gradOutput", dtype, lead + [oh, ow], rng.choice(VALUES[:4])),
            tensor("self", dtype, lead + [h, w], [0, 1]),
            attrs("kernel_size", [k, k]), attrs("stride", [s]), attrs("padding", [p]),
            attr("ceil_mode", "bool", ceil),
            attr("count_include_pad", "bool", rng.random() < 0.5),
            attr("divisor_override", "int", rng.choice([0, 0, 0, 3, -2])),
            attr("cube_math_type", "int", rng.choice([0, 1, 2, 3] if dtype == "fp32" else [0, 1]))]


def main(path: Path) -> None:
    rng = random.Random(2026)
    cases = []
    for _ in range(25):
        for dtype in DTYPES:
            for op, first in (("SmoothL1LossBackward", "gradOut"), ("L1LossBackward", "gradOutput"),
                              ("GeluBackwardV2", "gradOutput")):
                cases.append({"id": len(cases), "aclnn_name": "aclnn" + op,
                              "inputs": pointwise(rng, op, dtype, first)})
            cases.append({"id": len(cases), "aclnn_name": "aclnnAvgPool2dBackward",
                          "inputs": avg_pool(rng, dtype)})
    path.write_text(json.dumps(cases, indent=1) + "\n")
    print(f"wrote {len(cases)} cases to {path}")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).with_name("sweep.json"))
