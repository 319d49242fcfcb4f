"""The per-thread "recent error message" that `aclGetRecentErrMsg()` reports."""

import threading

_local = threading.local()


def set_recent_error(message: str) -> None:
    """Record `message` as this thread's most recent failure."""
    _local.message = message


def get_recent_error() -> str:
    """The message of this thread's most recent failure ("" if none)."""
    return getattr(_local, "message", "")
