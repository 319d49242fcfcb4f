"""aclnn: the Huawei CANN aclnn operator API in Python, on any machine.

Two API levels:
- the two-phase CANN API, names as in C: `aclCreateTensor`, `aclnnXxxGetWorkspaceSize`,
  `aclnnXxx`, with the pyACL-style runtime in `aclnn.acl`;
- a functional API on NumPy arrays, PyTorch tensors and DLPack objects:
  `smooth_l1_loss_backward`, `l1_loss_backward`, `gelu_backward`, `avg_pool2d_backward`.

Status codes, dtype/format enums and the error message of the last failure
(`aclGetRecentErrMsg`) are those of the real library.
"""

from __future__ import annotations

from . import acl
from .codes import (
    ACLNN_ERR_INNER,
    ACLNN_ERR_INNER_NULLPTR,
    ACLNN_ERR_PARAM_INVALID,
    ACLNN_ERR_PARAM_NULLPTR,
    ACLNN_ERR_RUNTIME_ERROR,
    ACLNN_SUCCESS,
)
from .dtypes import aclDataType, aclFormat
from .framework.executor import (
    aclDestroyAclOpExecutor,
    aclOpExecutor,
    aclSetAclOpExecutorRepeatable,
)
from .framework.status import AclnnError, ParamInvalidError, ParamNullptrError
from .ops.avg_pool2d_backward import (
    aclnnAvgPool2dBackward,
    aclnnAvgPool2dBackwardGetWorkspaceSize,
)
from .ops.gelu_backward_v2 import aclnnGeluBackwardV2, aclnnGeluBackwardV2GetWorkspaceSize
from .ops.l1_loss_backward import aclnnL1LossBackward, aclnnL1LossBackwardGetWorkspaceSize
from .ops.smooth_l1_loss_backward import (
    aclnnSmoothL1LossBackward,
    aclnnSmoothL1LossBackwardGetWorkspaceSize,
)
from .tensor import (
    aclCreateIntArray,
    aclCreateScalar,
    aclCreateTensor,
    aclDestroyIntArray,
    aclDestroyScalar,
    aclDestroyTensor,
    aclGetDataType,
    aclGetFormat,
    aclGetStorageShape,
    aclGetViewOffset,
    aclGetViewShape,
    aclGetViewStrides,
    aclIntArray,
    aclScalar,
    aclTensor,
)
from .user.functional import (
    avg_pool2d_backward,
    gelu_backward,
    l1_loss_backward,
    smooth_l1_loss_backward,
)

globals().update({member.name: member for member in aclDataType})
globals().update({member.name: member for member in aclFormat})

KEEP_DTYPE = 0
ALLOW_FP32_DOWN_PRECISION = 1
USE_FP16 = 2
USE_HF32 = 3


def aclGetRecentErrMsg() -> str:  # noqa: N802
    """The message of this thread's most recent failure ("" if none).

    >>> aclnn.aclGetViewShape(None)
    (None, 161001)
    >>> aclnn.aclGetRecentErrMsg()
    'aclGetViewShape: tensor is null'
    """
    return acl.get_recent_err_msg()


__all__ = [name for name in dir() if name.startswith(("acl", "ACL", "Acl", "Param"))] + [
    "KEEP_DTYPE", "ALLOW_FP32_DOWN_PRECISION", "USE_FP16", "USE_HF32",
    "smooth_l1_loss_backward", "l1_loss_backward", "gelu_backward", "avg_pool2d_backward",
]
