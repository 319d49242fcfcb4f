"""aclnnL1LossBackward: the gradient of L1Loss with respect to `self`.

    gradInput = gradOutput * sign(self - target)   (broadcast; sign(0) = 0, NaN stays NaN)
    reduction mean (1) also multiplies by 1 / numel(broadcast shape).

Inputs may be of any dtype that promotes to a supported floating dtype (an INT32 gradOutput
with FLOAT16 self computes in FLOAT16); such inputs are converted to the promoted dtype
first, as CANN's Cast step does.

Checks, in the documented order: null tensors (161001) -> reduction in {0, 1, 2} ->
promote(gradOutput, self) then with target exists, is castable to gradInput and is FLOAT,
FLOAT16 (+ BFLOAT16 on Ascend910B/910_93/950); gradInput's dtype is in that list -> every
rank <= 8 -> broadcast(gradOutput, self, target) equals gradInput's shape. Then (ours, not
on the page): gradInput's elements must not overlap each other, nor (documented contract)
an input's unless it is the same view (in place).

The library (loss/l1_loss_grad, op_api aclnn_l1_loss_backward.cpp CheckParams) runs the
same order but checks only that the promoted dtype is castable to gradInput's, not
gradInput's own dtype (ledger C3), and no format (C9). Its graph: Contiguous, BroadcastTo
the full shape (not a 0-D gradOutput on Ascend950), Cast to the promoted dtype, L1LossGrad,
Cast to gradInput's dtype, ViewCopy.
"""

from __future__ import annotations

import numpy as np

from ..framework import checks
from ..framework.executor import Plan, execute_api, workspace_api
from ..framework.soc import current_soc, library_contract
from ..framework.workspace import KERNEL_SCRATCH_950, Graph
from ..kernels import dag950, pointwise
from . import _l0
from ._pointwise import (
    MEAN,
    REDUCTIONS,
    FlatOutput,
    converting_launch,
    flat_input,
    numel,
    output_operand,
)

OP = "aclnnL1LossBackward"


def _workspace(gradOutput, self, target, gradInput, dtype, shape, soc_name) -> int:  # noqa: N803
    graph = Graph()
    g, x, y = (_l0.contiguous(graph, _l0.user(t)) for t in (gradOutput, self, target))
    if soc_name != "Ascend950" or gradOutput.ndim != 0:
        g = _l0.broadcast_to(graph, g, shape)
    x, y = _l0.broadcast_to(graph, x, shape), _l0.broadcast_to(graph, y, shape)
    x, g, y = _l0.cast(graph, x, dtype), _l0.cast(graph, g, dtype), _l0.cast(graph, y, dtype)
    scratch = KERNEL_SCRATCH_950 if soc_name == "Ascend950" else 0
    result = _l0.compute(graph, (g, x, y), shape, dtype, scratch)
    _l0.view_copy(graph, _l0.cast(graph, result, gradInput.dtype), gradInput)
    return graph.size()


def mean_coefficient_950(shape) -> np.float32:
    """The 950 tiling's mean coefficient: float32 1 divided by each dim of label's (the
    broadcast) shape in turn, each quotient rounded to float32."""
    coefficient = np.float32(1)
    for size in shape:
        coefficient = np.float32(coefficient / np.float32(size))
    return coefficient


def _dag950(gradOutput, self, target, gradInput, dtype, reduction, aliased):  # noqa: N803
    """The Ascend950 kernel (its DAG and tiling constant)."""
    shape = tuple(gradInput.view_shape)
    coefficient = mean_coefficient_950(shape) if reduction == MEAN else np.float32(1)
    scalar_grad = gradOutput.ndim == 0
    sink = FlatOutput(gradInput, dtype, aliased)

    def run() -> None:
        g = flat_input(gradOutput, dtype, None if scalar_grad else shape)
        x, y = flat_input(self, dtype, shape), flat_input(target, dtype, shape)
        out = sink.array()
        dag950.Dag950Launch(dag950.l1, (g, x, y, out, coefficient))()
        sink.finish(out)
    return run


def _documented_math(gradOutput, self, target, gradInput, dtype, shape, reduction, aliased):  # noqa: N803
    """The documented math through the fused kernels (inputs of other dtypes converted to
    the promoted dtype when the work runs); the steps of the plan."""
    scale = 1.0 / numel(shape) if reduction == MEAN else 1.0
    out, copy_out = output_operand(gradInput, dtype, shape, aliased)
    launch = converting_launch(lambda g, x, y, o: pointwise.l1_backward(shape, g, x, y, o, scale),
                               (gradOutput, self, target), dtype, shape, out)
    return [launch, *copy_out]


@workspace_api(OP)
def aclnnL1LossBackwardGetWorkspaceSize(gradOutput, self, target, reduction, gradInput):  # noqa: N802, N803
    """Phase 1: validate and plan; returns (workspace_size, executor, status).

    >>> ws, executor, ret = aclnnL1LossBackwardGetWorkspaceSize(g, x, y, 1, out)
    """
    checks.not_null(OP, gradOutput=gradOutput, self=self, target=target, gradInput=gradInput)
    checks.live_tensors(OP, gradOutput=gradOutput, self=self, target=target, gradInput=gradInput)
    reduction = checks.int_choice(OP, "reduction", reduction, REDUCTIONS)
    soc, library = current_soc(), library_contract()
    dtype = checks.promoted(OP, gradOutput=gradOutput, self=self, target=target)
    checks.castable(OP, dtype, "gradInput", gradInput)
    supported = soc.float_dtypes()
    checks.dtype_value_in(OP, soc, supported, "the promoted dtype of gradOutput, self and target",
                          dtype)
    if not library:  # the page's rule; the library does not check it (ledger C3)
        checks.dtype_in(OP, soc, supported, gradInput=gradInput)
    ranked = ({"self": self, "target": target, "gradOutput": gradOutput} if library  # its order
              else {"gradOutput": gradOutput, "self": self, "target": target})
    checks.rank_at_most(OP, **ranked, gradInput=gradInput)
    shape = checks.broadcast(OP, gradOutput=gradOutput, self=self, target=target)
    checks.shape_equals(OP, "gradInput", gradInput, shape, "the broadcast shape")
    checks.output_memory(OP, "gradInput", gradInput, True, library, gradOutput=gradOutput,
                         self=self, target=target)

    tensors = (gradOutput, self, target, gradInput)
    if numel(shape) == 0:
        return Plan(tensors=tensors)
    workspace = _workspace(gradOutput, self, target, gradInput, dtype, shape, soc.name)
    aliased = library and checks.output_aliases(gradInput, gradOutput=gradOutput, self=self,
                                                target=target)
    if library and soc.name == "Ascend950":
        steps = [_dag950(gradOutput, self, target, gradInput, dtype, reduction, aliased)]
    else:
        steps = _documented_math(gradOutput, self, target, gradInput, dtype, shape, reduction,
                                 aliased)
    return Plan(steps=steps, tensors=tensors, workspace_size=workspace)


aclnnL1LossBackward = execute_api(OP)
