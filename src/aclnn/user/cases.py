"""Case files in the JSON layout of the CANN operator test kit (SPEC §12): reading them,
with errors that name the case and the field, and drawing each case's inputs.

A case: `{"id": 0, "aclnn_name": "SmoothL1LossBackward", "inputs": [...]}`; unknown fields
are ignored, except the optional `expected_status` (our addition): the status the case
expects the operator to return (default 0, success).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import ml_dtypes
import numpy as np

from .operators import OPERATORS, OpSpec, find_operator

DTYPES = {
    **dict.fromkeys(("fp32", "float32", "float"), np.dtype(np.float32)),
    **dict.fromkeys(("fp16", "float16", "half"), np.dtype(np.float16)),
    **dict.fromkeys(("bf16", "bfloat16"), np.dtype(ml_dtypes.bfloat16)),
    **dict.fromkeys(("fp64", "float64", "double"), np.dtype(np.float64)),
    **{name: np.dtype(name) for name in ("int8", "int16", "int32", "int64", "uint8")},
    "bool": np.dtype(np.bool_),
}
DTYPE_NAMES = {np.dtype(np.float32): "fp32", np.dtype(np.float16): "fp16",
               np.dtype(ml_dtypes.bfloat16): "bf16", np.dtype(np.float64): "fp64"}
DRAW_CHUNK = 2**20  # elements drawn at a time: bounds a draw's float64 temporary
SPECIALS = {"nan": math.nan, "inf": math.inf, "-inf": -math.inf, "+inf": math.inf}
ATTR_TYPES = ("int", "float32", "float", "bool", "string")


class CaseFileError(ValueError):
    """A case file that does not follow the layout; the message names case and field."""


@dataclass(frozen=True)
class TensorInput:
    """A tensor to generate: dtype, shape and the value rule (`range_values`)."""

    dtype: np.dtype
    shape: tuple[int, ...]
    values: Any


@dataclass(frozen=True)
class Case:
    """One case of a file: its position, id, operator, tensors and raw attribute entries."""

    index: int
    id: Any
    op: OpSpec
    tensors: dict[str, TensorInput]
    attrs: dict[str, Any]
    expected_status: int = 0

    @property
    def label(self) -> str:
        """How messages name the case."""
        return f"case {self.index} (id {self.id!r})"


def dtype_label(dtype: np.dtype) -> str:
    """The case-file name of a dtype (fp32, fp16, bf16, ...)."""
    return DTYPE_NAMES.get(np.dtype(dtype), np.dtype(dtype).name)


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _special(value) -> bool:
    return isinstance(value, str) and value.strip().lower() in SPECIALS


def _integer_range(values) -> tuple[int, int] | tuple[None, None] | None:
    """For a [lo, hi] range: the integers it holds as (first, last), or (None, None) if it
    holds none; None when `values` is not a range."""
    if not (isinstance(values, list) and len(values) == 2 and all(map(_is_number, values))):
        return None
    first, last = math.ceil(values[0]), math.floor(values[1])
    return (first, last) if first <= last else (None, None)


def _check_range(where: str, pair) -> None:
    """A [lo, hi] range to draw from: finite, lo <= hi."""
    if not (math.isfinite(pair[1] - pair[0]) and pair[0] <= pair[1]):
        raise CaseFileError(f"{where}: range [lo, hi] needs finite lo <= hi, got {pair!r}")


def _check_values(where: str, values) -> None:
    """`range_values` of a tensor: [lo, hi], a number, a special, a list of numbers or
    specials, or {"name": "nd", "mean": [lo, hi], "std": [lo, hi]}."""
    if _is_number(values) or _special(values):
        return
    if isinstance(values, dict):
        if values.get("name") != "nd":
            raise CaseFileError(f"{where}: a distribution must be named 'nd', got "
                                f"{values.get('name')!r}")
        for key in ("mean", "std"):
            pair = values.get(key)
            if not (isinstance(pair, list) and len(pair) == 2 and all(map(_is_number, pair))):
                raise CaseFileError(f"{where}.{key} must be [lo, hi], got {pair!r}")
            _check_range(f"{where}.{key}", pair)
        if values["std"][0] < 0:
            raise CaseFileError(f"{where}.std must not be negative, got {values['std']!r}")
        return
    if isinstance(values, list) and values and all(_is_number(v) or _special(v) for v in values):
        if len(values) == 2 and all(map(_is_number, values)):
            _check_range(where, values)
        return
    raise CaseFileError(f"{where} must be [lo, hi], a number, 'nan'/'inf'/'-inf', a list of "
                        f"values or an 'nd' distribution, got {values!r}")


def _tensor(where: str, entry: dict) -> TensorInput:
    dtype = DTYPES.get(str(entry.get("dtype")).lower())
    if dtype is None:
        raise CaseFileError(f"{where}.dtype must be one of {sorted(DTYPES)}, "
                            f"got {entry.get('dtype')!r}")
    shape = entry.get("shape")
    if not (isinstance(shape, list) and all(isinstance(d, int) and not isinstance(d, bool)
                                            and d >= 0 for d in shape)):
        raise CaseFileError(f"{where}.shape must be a list of non-negative ints, got {shape!r}")
    if "range_values" not in entry:
        raise CaseFileError(f"{where}: missing field 'range_values'")
    values = entry["range_values"]
    _check_values(f"{where}.range_values", values)
    if dtype.kind in "iu" and _integer_range(values) is not None:
        first, last = _integer_range(values)
        info = np.iinfo(dtype)
        if first is None or first < info.min or last > info.max:
            raise CaseFileError(f"{where}.range_values {values!r} must hold integers within "
                                f"{entry['dtype']}'s [{info.min}, {info.max}]")
    return TensorInput(dtype, tuple(shape), values)


def _attr(where: str, entry: dict) -> dict:
    if str(entry.get("dtype")).lower() not in ATTR_TYPES:
        raise CaseFileError(f"{where}.dtype must be one of {list(ATTR_TYPES)}, "
                            f"got {entry.get('dtype')!r}")
    if "range_values" not in entry:
        raise CaseFileError(f"{where}: missing field 'range_values'")
    _attr_value(where, entry, np.random.default_rng(0))  # its value rule must be usable
    return entry


def _inputs(label: str, op: OpSpec, inputs) -> tuple[dict, dict]:
    if not isinstance(inputs, list):
        raise CaseFileError(f"{label}: 'inputs' must be a list, got {type(inputs).__name__}")
    tensors: dict[str, TensorInput] = {}
    attrs: dict[str, Any] = {}
    for i, entry in enumerate(inputs):
        where = f"{label}: inputs[{i}]"
        if isinstance(entry, list):  # a list-valued attribute: entries of one name
            if not entry or not all(isinstance(e, dict) for e in entry):
                raise CaseFileError(f"{where} must be a non-empty list of attr entries")
            names = [e.get("name") for e in entry]
            if not all(isinstance(n, str) for n in names) or len(set(names)) != 1:
                raise CaseFileError(f"{where}: a list-valued attribute needs entries of one "
                                    f"name, got names {names!r}")
            attrs[names[0]] = [_attr(f"{where}[{j}]", e) for j, e in enumerate(entry)]
            continue
        if not isinstance(entry, dict):
            raise CaseFileError(f"{where} must be an object, got {type(entry).__name__}")
        name, kind = entry.get("name"), entry.get("type")
        if not isinstance(name, str):
            raise CaseFileError(f"{where}.name must be a string, got {name!r}")
        if kind == "tensor":
            canonical = op.tensor_name(name)
            if canonical is None:
                raise CaseFileError(f"{where}: {op.name} has no tensor {name!r} "
                                    f"(its tensors: {list(op.tensors)})")
            tensors[canonical] = _tensor(f"{where} ({name})", entry)
        elif kind in ("attr", "attrs"):
            attrs[name] = _attr(f"{where} ({name})", entry)
        else:
            raise CaseFileError(f"{where}.type must be 'tensor', 'attr' or 'attrs', got {kind!r}")
    missing = [t for t in op.tensors if t not in tensors]
    if missing:
        raise CaseFileError(f"{label}: missing tensor input(s) {missing} of {op.name}")
    return tensors, attrs


def parse_cases(document: Any) -> list[Case]:
    """The cases of a parsed JSON document; CaseFileError names what is wrong and where.
    Any size is accepted: whether a case fits in memory is decided when it is run (see
    `runner.case_bytes`)."""
    if not isinstance(document, list):
        raise CaseFileError(f"a case file holds a JSON list of cases, got "
                            f"{type(document).__name__}")
    cases = []
    for index, raw in enumerate(document):
        label = f"case {index}"
        if not isinstance(raw, dict):
            raise CaseFileError(f"{label} must be an object, got {type(raw).__name__}")
        label = f"case {index} (id {raw.get('id')!r})"
        op = find_operator(raw.get("aclnn_name"))
        if op is None:
            raise CaseFileError(f"{label}: aclnn_name must name one of "
                                f"{sorted(OPERATORS)}, "
                                f"got {raw.get('aclnn_name')!r}")
        expected = raw.get("expected_status", 0)
        if not isinstance(expected, int) or isinstance(expected, bool):
            raise CaseFileError(f"{label}.expected_status must be an int, got {expected!r}")
        tensors, attrs = _inputs(label, op, raw.get("inputs"))
        cases.append(Case(index, raw.get("id", index), op, tensors, attrs, expected))
    return cases


def load_cases(path: str | Path) -> list[Case]:
    """Read and parse a case file."""
    try:
        document = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise CaseFileError(f"cannot read {path}: {exc.strerror}") from None
    except (ValueError, RecursionError) as exc:  # not UTF-8, not JSON, nested too deep
        raise CaseFileError(f"{path} is not valid JSON: {exc}") from None
    return parse_cases(document)


# --- drawing the inputs -------------------------------------------------------------------

def _value(v) -> float:
    return SPECIALS[v.strip().lower()] if isinstance(v, str) else v


def _sampler(spec: TensorInput, rng: np.random.Generator) -> Callable[[int], np.ndarray]:
    """A function drawing the tensor's next n values by its rule: float64, or int64 for an
    integer range (an 'nd' rule draws its mean and std now). Each Generator method used
    gives the same stream drawn in pieces as at once."""
    values, dtype = spec.values, spec.dtype
    if isinstance(values, dict):
        mean = rng.uniform(*values["mean"])
        std = rng.uniform(*values["std"])
        return lambda n: rng.normal(mean, std, n)
    if isinstance(values, list) and len(values) == 2 and all(map(_is_number, values)):
        if dtype == np.bool_:
            return lambda n: rng.integers(0, 2, n)
        if dtype.kind in "iu":
            first, last = _integer_range(values)
            return lambda n: rng.integers(first, last + 1, n)
        return lambda n: rng.uniform(*values, n)
    if isinstance(values, list):
        pool = np.array([_value(v) for v in values], np.float64)
        return lambda n: rng.choice(pool, n)
    return lambda n: np.full(n, _value(values), np.float64)


def draw_tensor(spec: TensorInput, rng: np.random.Generator) -> np.ndarray:
    """The tensor's values by its rule, drawn in float64 (ints for integer dtypes) and
    rounded once to its dtype, DRAW_CHUNK elements at a time: the values, and the
    Generator's state after, are those of one draw of the whole shape."""
    draw = _sampler(spec, rng)
    data = np.empty(math.prod(spec.shape), spec.dtype)
    with np.errstate(over="ignore", invalid="ignore"):
        for start in range(0, data.size, DRAW_CHUNK):
            data[start:start + DRAW_CHUNK] = draw(min(DRAW_CHUNK, data.size - start))
    return data.reshape(spec.shape)


def _attr_value(where: str, entry: dict, rng: np.random.Generator):
    """The attribute's value: the value itself, the one element of a one-element list, or
    for int/float a draw from [lo, hi]."""
    kind, value = str(entry["dtype"]).lower(), entry["range_values"]
    if isinstance(value, list) and len(value) == 1:
        value = value[0]
    elif isinstance(value, list) and len(value) == 2 and all(map(_is_number, value)):
        if kind == "int":
            first, last = _integer_range(value)
            if first is None or first < -(2**63) or last >= 2**63:
                raise CaseFileError(f"{where}: int range {value!r} must hold integers within "
                                    "int64")
            return int(rng.integers(first, last + 1))
        if kind in ("float32", "float"):
            _check_range(where, value)
            return float(rng.uniform(*value))
    if kind == "int" and _is_number(value) and float(value).is_integer():
        return int(value)
    if kind in ("float32", "float") and (_is_number(value) or _special(value)):
        return float(_value(value))
    if kind == "bool" and (isinstance(value, bool) or value in (0, 1)):
        return bool(value)
    if kind == "string" and isinstance(value, str):
        return value
    raise CaseFileError(f"{where}: an attribute of dtype {kind!r} cannot take "
                        f"range_values {entry['range_values']!r}")


def draw_attrs(case: Case, rng: np.random.Generator) -> dict[str, Any]:
    """Every attribute of the case's operator: from the file (list-valued ones as lists),
    else its default; attributes the operator does not know are ignored."""
    attrs = dict(case.op.defaults)
    for name, entry in case.attrs.items():
        if name not in attrs:
            continue
        if isinstance(entry, list):
            attrs[name] = [_attr_value(case.label, e, rng) for e in entry]
        else:
            attrs[name] = _attr_value(case.label, entry, rng)
    return attrs


def draw_inputs(case: Case, rng: np.random.Generator) -> tuple[dict[str, np.ndarray], dict]:
    """The case's tensors (in the operator's order) and attributes."""
    arrays = {name: draw_tensor(case.tensors[name], rng) for name in case.op.tensors}
    return arrays, draw_attrs(case, rng)
