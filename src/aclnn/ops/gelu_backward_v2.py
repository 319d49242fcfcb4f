"""aclnnGeluBackwardV2: the gradient of GELU with respect to `self`.

    approximate "none": gradInput = gradOutput * (Phi(x) + x * phi(x))
    approximate "tanh": with u = sqrt(2/pi)(x + 0.044715 x^3), t = tanh(u),
        gradInput = gradOutput * (1/2 (1 + t) + 1/2 x (1 - t^2) sqrt(2/pi)(1 + 3 * 0.044715 x^2))
    evaluated in float32 without cancellation (see kernels.fastmath); huge finite x gives
    gradOutput or 0, +-inf gives NaN.

Checks, in the documented order: null tensors and approximate (161001) -> gradOutput and
self dtypes in FLOAT, FLOAT16 (+ BFLOAT16 on Ascend910B/910_93/950), promotable, and the
promoted dtype equal to gradInput's -> broadcast(gradOutput, self) equals gradInput's
shape, rank <= 8 -> approximate is "none" or "tanh". Then (ours, not on the page):
gradInput's elements must not overlap each other, nor an input's unless it is the same
view (in place).
"""

from __future__ import annotations

from ..dtypes import dtype_name
from ..framework import checks
from ..framework.executor import Plan, execute_api, workspace_api
from ..framework.soc import current_soc
from ..framework.status import ParamInvalidError
from ..kernels import pointwise
from ._pointwise import numel, operand

OP = "aclnnGeluBackwardV2"
APPROXIMATIONS = ("none", "tanh")


@workspace_api(OP)
def aclnnGeluBackwardV2GetWorkspaceSize(gradOutput, self, approximate, gradInput):  # noqa: N802, N803
    """Phase 1: validate and plan; returns (workspace_size, executor, status).

    >>> ws, executor, ret = aclnnGeluBackwardV2GetWorkspaceSize(g, x, "tanh", out)
    """
    checks.not_null(OP, gradOutput=gradOutput, self=self, approximate=approximate,
                    gradInput=gradInput)
    checks.live_tensors(OP, gradOutput=gradOutput, self=self, gradInput=gradInput)
    soc = current_soc()
    checks.dtype_in(OP, soc, soc.float_dtypes(), gradOutput=gradOutput, self=self)
    dtype = checks.promoted(OP, gradOutput=gradOutput, self=self)
    if gradInput.dtype != dtype:
        raise ParamInvalidError(
            f"{OP}: gradInput dtype must equal the promoted dtype of gradOutput and self "
            f"{dtype_name(dtype)}, got {dtype_name(gradInput.dtype)}.")
    shape = checks.broadcast(OP, gradOutput=gradOutput, self=self)
    checks.shape_equals(OP, "gradInput", gradInput, shape, "the broadcast shape")
    checks.rank_at_most(OP, gradInput=gradInput)
    if not isinstance(approximate, str) or approximate not in APPROXIMATIONS:
        raise ParamInvalidError(
            f"{OP}: approximate must be 'none' or 'tanh', got {approximate!r}.")
    checks.output_memory(OP, "gradInput", gradInput, True, gradOutput=gradOutput, self=self)

    tensors = (gradOutput, self, gradInput)
    if numel(shape) == 0:
        return Plan(tensors=tensors)
    launch = pointwise.gelu_backward(shape, operand(gradOutput, shape), operand(self, shape),
                                     operand(gradInput, shape), approximate == "tanh")
    return Plan(steps=[launch], tensors=tensors)


aclnnGeluBackwardV2 = execute_api(OP)
