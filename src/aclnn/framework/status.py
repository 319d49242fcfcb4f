"""Status codes as exceptions: what a check raises, what phase 1 turns into a status.

`AclnnError` carries `.status` and `.message`; its subclasses are also the built-in
exceptions a Python user expects: a null argument (161001) is a `TypeError`, an invalid
one (161002) a `ValueError`.
"""

from __future__ import annotations

from ..codes import (
    ACLNN_ERR_INNER,
    ACLNN_ERR_INNER_NULLPTR,
    ACLNN_ERR_PARAM_INVALID,
    ACLNN_ERR_PARAM_NULLPTR,
    ACLNN_ERR_RUNTIME_ERROR,
    ACLNN_SUCCESS,
)

__all__ = [
    "ACLNN_SUCCESS", "ACLNN_ERR_PARAM_NULLPTR", "ACLNN_ERR_PARAM_INVALID",
    "ACLNN_ERR_RUNTIME_ERROR", "ACLNN_ERR_INNER", "ACLNN_ERR_INNER_NULLPTR",
    "AclnnError", "ParamNullptrError", "ParamInvalidError", "error_for",
]


class AclnnError(Exception):
    """A failed aclnn call: `.status` is the aclnn status code, `.message` says why."""

    status = ACLNN_ERR_INNER

    def __init__(self, message: str, status: int | None = None):
        super().__init__(message)
        self.message = message
        if status is not None:
            self.status = status


class ParamNullptrError(AclnnError, TypeError):
    """161001 ACLNN_ERR_PARAM_NULLPTR: a required argument is null (None)."""

    status = ACLNN_ERR_PARAM_NULLPTR


class ParamInvalidError(AclnnError, ValueError):
    """161002 ACLNN_ERR_PARAM_INVALID: an argument breaks the operator's rules."""

    status = ACLNN_ERR_PARAM_INVALID


def error_for(status: int, message: str) -> AclnnError:
    """The exception for a failed call's status: ParamNullptrError for 161001,
    ParamInvalidError for 161002, else an AclnnError carrying `status`."""
    if status == ACLNN_ERR_PARAM_NULLPTR:
        return ParamNullptrError(message)
    if status == ACLNN_ERR_PARAM_INVALID:
        return ParamInvalidError(message)
    return AclnnError(message, status)
