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
on the page): gradInput's elements must not overlap each other, nor an input's unless it
is the same view (in place).
"""

from __future__ import annotations

from ..framework import checks
from ..framework.executor import Plan, execute_api, workspace_api
from ..framework.soc import current_soc
from ..kernels import pointwise
from ._pointwise import KERNEL_CODE, MEAN, REDUCTIONS, cast_operand, numel, operand

OP = "aclnnL1LossBackward"


@workspace_api(OP)
def aclnnL1LossBackwardGetWorkspaceSize(gradOutput, self, target, reduction, gradInput):  # noqa: N802, N803
    """Phase 1: validate and plan; returns (workspace_size, executor, status).

    >>> ws, executor, ret = aclnnL1LossBackwardGetWorkspaceSize(g, x, y, 1, out)
    """
    checks.not_null(OP, gradOutput=gradOutput, self=self, target=target, gradInput=gradInput)
    checks.live_tensors(OP, gradOutput=gradOutput, self=self, target=target, gradInput=gradInput)
    reduction = checks.int_choice(OP, "reduction", reduction, REDUCTIONS)
    soc = current_soc()
    dtype = checks.promoted(OP, gradOutput=gradOutput, self=self, target=target)
    checks.castable(OP, dtype, "gradInput", gradInput)
    supported = soc.float_dtypes()
    checks.dtype_value_in(OP, soc, supported, "the promoted dtype of gradOutput, self and target",
                          dtype)
    checks.dtype_in(OP, soc, supported, gradInput=gradInput)
    checks.rank_at_most(OP, gradOutput=gradOutput, self=self, target=target, gradInput=gradInput)
    shape = checks.broadcast(OP, gradOutput=gradOutput, self=self, target=target)
    checks.shape_equals(OP, "gradInput", gradInput, shape, "the broadcast shape")
    checks.output_memory(OP, "gradInput", gradInput, True, gradOutput=gradOutput, self=self,
                         target=target)

    tensors = (gradOutput, self, target, gradInput)
    if numel(shape) == 0:
        return Plan(tensors=tensors)
    scale = 1.0 / numel(shape) if reduction == MEAN else 1.0

    inputs = (gradOutput, self, target)
    if all(t.dtype in KERNEL_CODE for t in inputs):
        launch = pointwise.l1_backward(shape, *(operand(t, shape) for t in inputs),
                                       operand(gradInput, shape), scale)
        return Plan(steps=[launch], tensors=tensors)

    def cast_then_run() -> None:
        """Non-float inputs are converted to the promoted dtype when the work runs."""
        converted = [operand(t, shape) if t.dtype in KERNEL_CODE else cast_operand(t, dtype, shape)
                     for t in inputs]
        pointwise.l1_backward(shape, *converted, operand(gradInput, shape), scale)()

    return Plan(steps=[cast_then_run], tensors=tensors)


aclnnL1LossBackward = execute_api(OP)
