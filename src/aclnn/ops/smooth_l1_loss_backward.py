"""aclnnSmoothL1LossBackward: the gradient of SmoothL1Loss with respect to `self`.

    d = self - target (broadcast), computed in the promoted dtype (float32 compute)
    gradInput = gradOut * d / beta        if |d| < beta
              = gradOut * sign(d)         otherwise (sign(0) = 0; beta = 0 is pure sign)
    reduction mean (1) also multiplies by 1 / numel(self); none (0) and sum (2) do not.

Checks, in the documented order (the library's op_api CheckParams runs the same order):
null tensors (161001) -> each tensor's dtype in FLOAT, FLOAT16 (+ BFLOAT16 on
Ascend910B/910_93/950) -> rank of gradOut, self, target <= 8 -> reduction in {0, 1, 2} ->
beta >= 0 -> promote(gradOut, self, target) castable to gradInput -> broadcast(gradOut,
self, target) equals gradInput's shape. Then (ours, not on the page): gradInput's elements
must not overlap each other, nor (documented contract) an input's unless it is the same
view (in place).

The library (loss/smooth_l1_loss_grad_v2, op_api aclnn_smooth_l1_loss_backward.cpp) makes
the inputs contiguous, casts them to the promoted dtype, runs SmoothL1LossGradV2, casts the
result to gradInput's dtype and copies it into gradInput.
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
    flat_input,
    numel,
    operand,
    output_operand,
)

OP = "aclnnSmoothL1LossBackward"
INV_SIGMA_LIMIT = 1e-6  # the 950 tiling: |beta| below this gives 1/beta = NaN


def _workspace(gradOut, self, target, gradInput, dtype, shape, scratch: int) -> int:  # noqa: N803
    graph = Graph()
    inputs = [_l0.contiguous(graph, _l0.user(t)) for t in (gradOut, self, target)]
    g, x, y = (_l0.cast(graph, v, dtype) for v in inputs)
    result = _l0.compute(graph, (x, y, g), shape, dtype, scratch)
    _l0.view_copy(graph, _l0.cast(graph, result, gradInput.dtype), gradInput)
    return graph.size()


def _dag950(gradOut, self, target, gradInput, dtype, beta, reduction, aliased):  # noqa: N803
    """The Ascend950 kernel (its DAG, tiling constants and scalar-gradOut variant)."""
    sigma = np.float32(beta)
    tiny = abs(sigma) < np.float32(INV_SIGMA_LIMIT)
    invert = np.float32(np.nan) if tiny else np.float32(1) / sigma
    coefficient = np.float32(1.0 / max(numel(self.view_shape), 1)) if reduction == MEAN \
        else np.float32(1)
    scalar_grad = gradOut.numel == 1
    shape = tuple(gradInput.view_shape)
    sink = FlatOutput(gradInput, dtype, aliased)

    def run() -> None:
        g = flat_input(gradOut, dtype, None if scalar_grad else shape)
        x, y = flat_input(self, dtype, shape), flat_input(target, dtype, shape)
        out = sink.array()
        dag950.Dag950Launch(dag950.smooth_l1, (g, x, y, out, sigma, invert, coefficient,
                                               scalar_grad))()
        sink.finish(out)
    return run


@workspace_api(OP)
def aclnnSmoothL1LossBackwardGetWorkspaceSize(gradOut, self, target, reduction, beta, gradInput):  # noqa: N802, N803
    """Phase 1: validate and plan; returns (workspace_size, executor, status).

    >>> ws, executor, ret = aclnnSmoothL1LossBackwardGetWorkspaceSize(g, x, y, 0, 1.0, out)
    """
    checks.not_null(OP, gradOut=gradOut, self=self, target=target, gradInput=gradInput)
    checks.live_tensors(OP, gradOut=gradOut, self=self, target=target, gradInput=gradInput)
    soc, library = current_soc(), library_contract()
    checks.dtype_in(OP, soc, soc.float_dtypes(),
                    gradOut=gradOut, self=self, target=target, gradInput=gradInput)
    checks.rank_at_most(OP, gradOut=gradOut, self=self, target=target)
    reduction = checks.int_choice(OP, "reduction", reduction, REDUCTIONS)
    beta = checks.real_number(OP, "beta", beta)
    if library:  # the C prototype's beta is a float
        with np.errstate(over="ignore"):
            beta = float(np.float32(beta))
    checks.non_negative(OP, "beta", beta)
    dtype = checks.promoted(OP, gradOut=gradOut, self=self, target=target)
    checks.castable(OP, dtype, "gradInput", gradInput)
    shape = checks.broadcast(OP, gradOut=gradOut, self=self, target=target)
    checks.shape_equals(OP, "gradInput", gradInput, shape, "the broadcast shape")
    checks.output_memory(OP, "gradInput", gradInput, True, library, gradOut=gradOut, self=self,
                         target=target)

    tensors = (gradOut, self, target, gradInput)
    if numel(shape) == 0:
        return Plan(tensors=tensors)
    dag = library and soc.name == "Ascend950"
    workspace = _workspace(gradOut, self, target, gradInput, dtype, shape,
                           KERNEL_SCRATCH_950 if soc.name == "Ascend950" else 0)
    aliased = library and checks.output_aliases(gradInput, gradOut=gradOut, self=self,
                                                target=target)
    if dag:
        step = _dag950(gradOut, self, target, gradInput, dtype, beta, reduction, aliased)
        return Plan(steps=[step], tensors=tensors, workspace_size=workspace)
    scale = 1.0 / numel(self.view_shape) if reduction == MEAN else 1.0
    out, copy_out = output_operand(gradInput, dtype, shape, aliased)
    launch = pointwise.smooth_l1_backward(
        shape, operand(gradOut, shape), operand(self, shape), operand(target, shape), out, beta,
        scale)
    return Plan(steps=[launch, *copy_out], tensors=tensors, workspace_size=workspace)


aclnnSmoothL1LossBackward = execute_api(OP)
