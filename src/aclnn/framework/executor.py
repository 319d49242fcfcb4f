"""The aclOpExecutor: a plan built by phase 1 and enqueued on a stream by phase 2.

Phase 1 (`aclnnXxxGetWorkspaceSize`) runs the operator's checks and returns an executor
holding its plan; phase 2 (`aclnnXxx`) checks the workspace and the executor, then enqueues
the plan. An executor runs once unless `aclSetAclOpExecutorRepeatable` was called; then it
lives until `aclDestroyAclOpExecutor`.
"""

from __future__ import annotations

import dataclasses
import functools
import operator
import threading
from collections.abc import Callable, Sequence

from ..acl import _memory
from ..acl._errmsg import set_recent_error
from ..acl._streams import TaskError, streams
from ..tensor import aclTensor
from . import plan_cache
from .soc import library_contract
from .status import (
    ACLNN_ERR_INNER,
    ACLNN_ERR_PARAM_INVALID,
    ACLNN_ERR_PARAM_NULLPTR,
    ACLNN_ERR_RUNTIME_ERROR,
    ACLNN_SUCCESS,
    AclnnError,
)

_consume_lock = threading.Lock()


@dataclasses.dataclass(slots=True)
class Plan:
    """What phase 2 will run: `steps` in order; `tensors` must still be live when it runs;
    `op` names the operator in errors (set by `workspace_api`). Calling the plan runs it:
    it is the task a stream queues."""

    steps: list[Callable[[], None]] = dataclasses.field(default_factory=list)
    tensors: Sequence[aclTensor] = ()
    workspace_size: int = 0
    op: str = ""

    def __call__(self) -> None:
        for tensor in self.tensors:  # `aclTensor.is_live` written out: the hot path
            region = tensor.region
            if tensor.destroyed or (region is not None and not region.alive):
                raise TaskError(ACLNN_ERR_RUNTIME_ERROR,
                                f"{self.op}: a tensor of the plan was destroyed or its memory "
                                f"freed before the queued work ran: {tensor!r}.")
        for step in self.steps:
            step()


class aclOpExecutor:  # noqa: N801 - the CANN name
    """The executor of one phase-1 call."""

    __slots__ = ("op_name", "plan", "repeatable", "consumed", "destroyed")

    def __init__(self, op_name: str, plan: Plan):
        self.op_name = op_name
        self.plan = plan
        self.repeatable = False
        self.consumed = False
        self.destroyed = False

    def __repr__(self) -> str:
        return f"aclOpExecutor({self.op_name})"


def aclSetAclOpExecutorRepeatable(executor: aclOpExecutor) -> int:  # noqa: N802
    """Let `executor` run any number of times, until `aclDestroyAclOpExecutor`.

    >>> ws_size, executor, ret = aclnn.aclnnL1LossBackwardGetWorkspaceSize(g, x, y, 1, out)
    >>> ret = aclnn.aclSetAclOpExecutorRepeatable(executor)
    """
    status = _usable_executor("aclSetAclOpExecutorRepeatable", executor)
    if status == ACLNN_SUCCESS:
        executor.repeatable = True
    return status


def aclDestroyAclOpExecutor(executor: aclOpExecutor) -> int:  # noqa: N802
    """Release `executor`; later use of it fails with 161002.

    >>> ret = aclnn.aclDestroyAclOpExecutor(executor)
    """
    status = _usable_executor("aclDestroyAclOpExecutor", executor)
    if status == ACLNN_SUCCESS:
        executor.destroyed = True
        executor.plan = None
    return status


def _usable_executor(where: str, executor) -> int:
    if executor is None:
        set_recent_error(f"{where}: executor must not be null, got None.")
        return ACLNN_ERR_PARAM_NULLPTR
    if not isinstance(executor, aclOpExecutor):
        set_recent_error(f"{where}: executor must be an aclOpExecutor, got {executor!r}.")
        return ACLNN_ERR_PARAM_INVALID
    if executor.destroyed:
        set_recent_error(f"{where}: executor was destroyed, got {executor!r}.")
        return ACLNN_ERR_PARAM_INVALID
    if executor.consumed and not executor.repeatable:
        set_recent_error(f"{where}: executor has already run and is not repeatable, "
                         f"got {executor!r}.")
        return ACLNN_ERR_PARAM_INVALID
    return ACLNN_SUCCESS


def _fail(status: int, message: str) -> int:
    set_recent_error(message)
    return status


def _check_workspace(op: str, workspace, workspace_size, needed: int) -> int:
    try:
        size = operator.index(workspace_size)
    except TypeError:
        return _fail(ACLNN_ERR_PARAM_INVALID,
                     f"{op}: workspaceSize must be an int, got {workspace_size!r}.")
    if size < needed:
        return _fail(ACLNN_ERR_PARAM_INVALID,
                     f"{op}: workspaceSize must be >= {needed}, got {workspace_size!r}.")
    if needed == 0:
        return ACLNN_SUCCESS
    if workspace is None:
        return _fail(ACLNN_ERR_PARAM_NULLPTR, f"{op}: workspace must not be null, got None.")
    if not isinstance(workspace, int) or _memory.device_heap.find(workspace, needed) is None:
        return _fail(ACLNN_ERR_PARAM_INVALID,
                     f"{op}: workspace {workspace!r} is not a live device allocation of "
                     f"{needed} bytes.")
    return ACLNN_SUCCESS


def _positive(value) -> bool:
    try:
        return operator.index(value) > 0
    except TypeError:
        return False


def workspace_api(op: str):
    """Decorator: `plan(*args) -> Plan` becomes phase 1, `(workspace_size, executor, status)`.

    A check's AclnnError becomes its status and the recent error message; any other
    exception is an internal error (561000), never a crash. A call that repeats a
    successful one reuses its plan (`plan_cache`, CANN's aclnn cache).
    """
    def decorate(plan_fn: Callable[..., Plan]):
        @functools.wraps(plan_fn)
        def get_workspace_size(*args):
            cache = plan_cache.cache
            cached, key = cache.repeat(op, args), None
            if cached is None:
                key = cache.key(op, args)
                cached = cache.lookup(key, args) if key is not None else None
            if cached is not None:
                steps, workspace_size, tensors = cached
                plan = Plan(list(steps), tensors, workspace_size, op)
                return workspace_size, aclOpExecutor(op, plan), ACLNN_SUCCESS
            try:
                plan = plan_fn(*args)
                plan.op = op
            except AclnnError as exc:
                set_recent_error(exc.message)
                return 0, None, exc.status
            except Exception as exc:  # a bug must surface as a status, not a crash
                set_recent_error(f"{op}: internal error: {type(exc).__name__}: {exc}")
                return 0, None, ACLNN_ERR_INNER
            if key is not None:
                cache.store(key, args, plan.steps, plan.workspace_size, plan.tensors)
            return plan.workspace_size, aclOpExecutor(op, plan), ACLNN_SUCCESS

        get_workspace_size.__name__ = get_workspace_size.__qualname__ = op + "GetWorkspaceSize"
        return get_workspace_size
    return decorate


def execute_api(op: str) -> Callable[..., int]:
    """Phase 2 of `op`: `aclnnXxx(workspace, workspaceSize, executor, stream) -> status`:
    check, then enqueue the executor's plan on `stream`.

    A repeated small call spends most of its time in this module's Python, so the usual
    case (a fresh executor, no workspace, the default stream) is tested first with plain
    attribute checks, and the general checks run only where it does not hold."""
    def run(workspace, workspaceSize, executor, stream) -> int:  # noqa: N803
        if type(executor) is not aclOpExecutor or executor.destroyed or executor.consumed:
            status = _usable_executor(op, executor)
            if status != ACLNN_SUCCESS:
                return status
        if executor.op_name != op:
            return _fail(ACLNN_ERR_PARAM_INVALID,
                         f"{op}: executor was built by {executor.op_name}GetWorkspaceSize.")
        plan = executor.plan
        if plan is None:  # spent or destroyed by another thread since the check above
            return _fail(ACLNN_ERR_PARAM_INVALID,
                         f"{op}: executor has already run or was destroyed, got {executor!r}.")
        if type(workspaceSize) is not int or workspaceSize != 0 or plan.workspace_size != 0:
            if workspace is None and _positive(workspaceSize) and library_contract():
                # the library's CommonOpExecutorRun: 161001, and it deletes the executor
                executor.destroyed, executor.plan = True, None
                return _fail(ACLNN_ERR_PARAM_NULLPTR,
                             f"{op}: workspace must not be null when workspaceSize is "
                             f"{workspaceSize} (the executor is released, as the library does).")
            status = _check_workspace(op, workspace, workspaceSize, plan.workspace_size)
            if status != ACLNN_SUCCESS:
                return status
        for tensor in plan.tensors:  # `aclTensor.is_live` written out
            region = tensor.region
            if tensor.destroyed or (region is not None and not region.alive):
                return _fail(ACLNN_ERR_PARAM_INVALID,
                             f"{op}: a tensor of the executor was destroyed or its memory freed "
                             f"after GetWorkspaceSize: {tensor!r}.")
        queue = streams.default if stream is None else streams.get(stream)
        if queue is None:
            return _fail(ACLNN_ERR_PARAM_INVALID, f"{op}: stream {stream!r} is not a live stream.")
        _consume_lock.acquire()  # two threads racing on one run-once executor: only one runs it
        try:
            if executor.destroyed or (executor.consumed and not executor.repeatable):
                status = _usable_executor(op, executor)  # lost the race: says why
            else:
                status, executor.consumed = ACLNN_SUCCESS, True
        finally:
            _consume_lock.release()
        if status != ACLNN_SUCCESS:
            return status
        if plan.steps:
            queue.enqueue(plan)
        if not executor.repeatable:
            executor.plan = None  # spent: the plan lives on in the queue only, until it runs
        return ACLNN_SUCCESS

    run.__name__ = run.__qualname__ = op
    run.__doc__ = (f"Phase 2 of {op}: check the workspace and executor, then enqueue the plan "
                   "on `stream` (None: the default stream); returns the status.\n\n"
                   f">>> ret = {op}(None, ws_size, executor, stream)")
    return run
