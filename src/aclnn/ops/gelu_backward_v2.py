"""aclnnGeluBackwardV2: the gradient of GELU with respect to `self`.

    approximate "none": gradInput = gradOutput * (Phi(x) + x * phi(x))
    approximate "tanh": with u = sqrt(2/pi)(x + 0.044715 x^3), t = tanh(u),
        gradInput = gradOutput * (1/2 (1 + t) + 1/2 x (1 - t^2) sqrt(2/pi)(1 + 3 * 0.044715 x^2))
    evaluated in float32 by branch-free formulas (see kernels.gelu_rows); huge finite x gives
    gradOutput or 0, +-inf gives NaN.

Checks, in the documented order: null tensors and approximate (161001) -> gradOutput and
self dtypes in FLOAT, FLOAT16 (+ BFLOAT16 on Ascend910B/910_93/950), promotable, and the
promoted dtype equal to gradInput's -> broadcast(gradOutput, self) equals gradInput's
shape, rank <= 8 -> approximate is "none" or "tanh". Then (ours, not on the page):
gradInput's elements must not overlap each other, nor (documented contract) an input's
unless it is the same view (in place).

The library (activation/gelu_grad_v2, op_api aclnn_gelu_backward_v2.cpp CheckParams)
checks only the promoted dtype (a BFLOAT16 result only where the SoC has BFLOAT16; ledger
C2), no rank (C1) and no format (C9). Its graph: Contiguous and BroadcastTo of gradOutput,
then of self, Cast of self and gradOutput to the promoted dtype, GeluGradV2, ViewCopy.
"""

from __future__ import annotations

from ..dtypes import aclDataType as D
from ..dtypes import dtype_name
from ..framework import checks
from ..framework.executor import Plan, execute_api, workspace_api
from ..framework.soc import current_soc, library_contract
from ..framework.status import ParamInvalidError
from ..framework.workspace import KERNEL_SCRATCH_950, Graph
from ..kernels import dag950, lookup, pointwise
from ..kernels.typed import VIEW_DTYPE
from . import _l0
from ._pointwise import (
    KERNEL_CODE,
    FlatOutput,
    converting_launch,
    flat_input,
    numel,
    output_operand,
)

OP = "aclnnGeluBackwardV2"
APPROXIMATIONS = ("none", "tanh")


LIBRARY_DTYPES = (D.ACL_FLOAT, D.ACL_FLOAT16, D.ACL_BF16)


def _workspace(gradOutput, self, gradInput, dtype, shape, soc_name) -> int:  # noqa: N803
    graph = Graph()
    g = _l0.broadcast_to(graph, _l0.contiguous(graph, _l0.user(gradOutput)), shape)
    x = _l0.broadcast_to(graph, _l0.contiguous(graph, _l0.user(self)), shape)
    x, g = _l0.cast(graph, x, dtype), _l0.cast(graph, g, dtype)
    scratch = KERNEL_SCRATCH_950 if soc_name == "Ascend950" else 0
    _l0.view_copy(graph, _l0.compute(graph, (g, x), shape, dtype, scratch), gradInput)
    return graph.size()


def _library_dtype(soc, gradOutput, self, gradInput) -> int:  # noqa: N803
    """The library's dtype rule: the promoted dtype of gradOutput and self exists, is not
    BFLOAT16 on a SoC without it, is FLOAT, FLOAT16 or BFLOAT16, and is gradInput's."""
    dtype = checks.promoted(OP, gradOutput=gradOutput, self=self)
    if dtype == D.ACL_BF16 and not soc.bf16:
        raise ParamInvalidError(f"{OP}: the promoted dtype of gradOutput and self is DT_BF16, "
                                f"which {soc.name} does not support.")
    checks.dtype_value_in(OP, soc, LIBRARY_DTYPES, "the promoted dtype of gradOutput and self",
                          dtype)
    return dtype


def _dag950(gradOutput, self, gradInput, dtype, use_tanh: bool, aliased: bool):  # noqa: N803
    """The Ascend950 kernel: the erf or tanh DAG in float32."""
    shape = tuple(gradInput.view_shape)
    sink = FlatOutput(gradInput, dtype, aliased)
    view = VIEW_DTYPE[KERNEL_CODE[dtype]]
    factors = dag950.factor_table(view, use_tanh) if view.itemsize == 2 else None

    def run() -> None:
        g, x = flat_input(gradOutput, dtype, shape), flat_input(self, dtype, shape)
        out = sink.array()
        if factors is not None:  # 16-bit inputs: the factor of each of their 65536 values
            dag950.Dag950Launch(lookup.scaled_lookup, (g, x, out, *factors))()
        else:
            kernel = dag950.gelu_tanh if use_tanh else dag950.gelu_erf
            dag950.Dag950Launch(kernel, (g, x, out))()
        sink.finish(out)
    return run


@workspace_api(OP)
def aclnnGeluBackwardV2GetWorkspaceSize(gradOutput, self, approximate, gradInput):  # noqa: N802, N803
    """Phase 1: validate and plan; returns (workspace_size, executor, status).

    >>> ws, executor, ret = aclnnGeluBackwardV2GetWorkspaceSize(g, x, "tanh", out)
    """
    checks.not_null(OP, gradOutput=gradOutput, self=self, approximate=approximate,
                    gradInput=gradInput)
    checks.live_tensors(OP, gradOutput=gradOutput, self=self, gradInput=gradInput)
    soc, library = current_soc(), library_contract()
    if library:
        dtype = _library_dtype(soc, gradOutput, self, gradInput)
    else:
        checks.dtype_in(OP, soc, soc.float_dtypes(), gradOutput=gradOutput, self=self)
        dtype = checks.promoted(OP, gradOutput=gradOutput, self=self)
    if gradInput.dtype != dtype:
        raise ParamInvalidError(
            f"{OP}: gradInput dtype must equal the promoted dtype of gradOutput and self "
            f"{dtype_name(dtype)}, got {dtype_name(gradInput.dtype)}.")
    shape = checks.broadcast(OP, gradOutput=gradOutput, self=self)
    checks.shape_equals(OP, "gradInput", gradInput, shape, "the broadcast shape")
    if not library:  # the page's rule; the library has no rank check (ledger C1)
        checks.rank_at_most(OP, gradInput=gradInput)
    if not isinstance(approximate, str) or approximate not in APPROXIMATIONS:
        raise ParamInvalidError(
            f"{OP}: approximate must be 'none' or 'tanh', got {approximate!r}.")
    checks.output_memory(OP, "gradInput", gradInput, True, library, gradOutput=gradOutput,
                         self=self)

    tensors = (gradOutput, self, gradInput)
    if numel(shape) == 0:
        return Plan(tensors=tensors)
    workspace = _workspace(gradOutput, self, gradInput, dtype, shape, soc.name)
    aliased = library and checks.output_aliases(gradInput, gradOutput=gradOutput, self=self)
    use_tanh = approximate == "tanh"
    if library and soc.name == "Ascend950":
        step = _dag950(gradOutput, self, gradInput, dtype, use_tanh, aliased)
        return Plan(steps=[step], tensors=tensors, workspace_size=workspace)
    out, copy_out = output_operand(gradInput, dtype, shape, aliased)
    launch = converting_launch(
        lambda g, x, o: pointwise.gelu_backward(shape, g, x, o, use_tanh), (gradOutput, self),
        dtype, shape, out)
    return Plan(steps=[launch, *copy_out], tensors=tensors, workspace_size=workspace)


aclnnGeluBackwardV2 = execute_api(OP)
