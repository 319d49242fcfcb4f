"""aclnnSmoothL1LossBackward: the gradient of SmoothL1Loss with respect to `self`.

    d = self - target (broadcast), computed in the promoted dtype (float32 compute)
    gradInput = gradOut * d / beta        if |d| < beta
              = gradOut * sign(d)         otherwise (sign(0) = 0; beta = 0 is pure sign)
    reduction mean (1) also multiplies by 1 / numel(self); none (0) and sum (2) do not.

Checks, in the documented order: null tensors (161001) -> each tensor's dtype in FLOAT,
FLOAT16 (+ BFLOAT16 on Ascend910B/910_93/950) -> rank of gradOut, self, target <= 8 ->
reduction in {0, 1, 2} -> beta >= 0 -> promote(gradOut, self, target) castable to
gradInput -> broadcast(gradOut, self, target) equals gradInput's shape. Then (ours, not on
the page): gradInput's elements must not overlap each other, nor an input's unless it is
the same view (in place).
"""

from __future__ import annotations

from ..framework import checks
from ..framework.executor import Plan, execute_api, workspace_api
from ..framework.soc import current_soc
from ..kernels import pointwise
from ._pointwise import MEAN, REDUCTIONS, numel, operand

OP = "aclnnSmoothL1LossBackward"


@workspace_api(OP)
def aclnnSmoothL1LossBackwardGetWorkspaceSize(gradOut, self, target, reduction, beta, gradInput):  # noqa: N802, N803
    """Phase 1: validate and plan; returns (workspace_size, executor, status).

    >>> ws, executor, ret = aclnnSmoothL1LossBackwardGetWorkspaceSize(g, x, y, 0, 1.0, out)
    """
    checks.not_null(OP, gradOut=gradOut, self=self, target=target, gradInput=gradInput)
    checks.live_tensors(OP, gradOut=gradOut, self=self, target=target, gradInput=gradInput)
    soc = current_soc()
    checks.dtype_in(OP, soc, soc.float_dtypes(),
                    gradOut=gradOut, self=self, target=target, gradInput=gradInput)
    checks.rank_at_most(OP, gradOut=gradOut, self=self, target=target)
    reduction = checks.int_choice(OP, "reduction", reduction, REDUCTIONS)
    beta = checks.real_number(OP, "beta", beta)
    checks.non_negative(OP, "beta", beta)
    dtype = checks.promoted(OP, gradOut=gradOut, self=self, target=target)
    checks.castable(OP, dtype, "gradInput", gradInput)
    shape = checks.broadcast(OP, gradOut=gradOut, self=self, target=target)
    checks.shape_equals(OP, "gradInput", gradInput, shape, "the broadcast shape")
    checks.output_memory(OP, "gradInput", gradInput, True, gradOut=gradOut, self=self,
                         target=target)

    tensors = (gradOut, self, target, gradInput)
    if numel(shape) == 0:
        return Plan(tensors=tensors)
    scale = 1.0 / numel(self.view_shape) if reduction == MEAN else 1.0
    launch = pointwise.smooth_l1_backward(
        shape, operand(gradOut, shape), operand(self, shape), operand(target, shape),
        operand(gradInput, shape), beta, scale)
    return Plan(steps=[launch], tensors=tensors)


aclnnSmoothL1LossBackward = execute_api(OP)
