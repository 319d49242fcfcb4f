"""The runtime layer, pyACL style: `from aclnn import acl`.

"Device" memory is host RAM owned by this runtime; addresses are real addresses.
"""

from __future__ import annotations

from . import rt, util
from ._codes import *  # noqa: F403 - the pyACL constants live on `acl`
from ._codes import ACL_ERROR_REPEAT_FINALIZE, ACL_ERROR_REPEAT_INITIALIZE, ACL_SUCCESS
from ._device import CONTRACTS, state
from ._errmsg import get_recent_error, set_recent_error
from ._memory import device_heap, host_arrays, host_heap
from ._streams import streams


def init(config_path: str | None = None) -> int:
    """Initialise the runtime; a second call without `finalize` returns 100002.

    >>> ret = acl.init()
    >>> acl.init()  # already initialised: ACL_ERROR_REPEAT_INITIALIZE
    100002
    """
    with state.lock:
        if state.initialized:
            set_recent_error("init: the runtime is already initialised")
            return ACL_ERROR_REPEAT_INITIALIZE
        state.initialized = True
    return ACL_SUCCESS


def finalize() -> int:
    """Finish all queued work, then release every allocation, stream and host registration.

    >>> ret = acl.finalize()
    >>> acl.finalize()  # not initialised any more: ACL_ERROR_REPEAT_FINALIZE
    100037
    """
    with state.lock:
        if not state.initialized:
            set_recent_error("finalize: the runtime is not initialised")
            return ACL_ERROR_REPEAT_FINALIZE
        state.initialized = False
    rt.synchronize_device()
    for stream in streams.all():
        streams.remove(stream.handle)
    device_heap.release_all()
    host_heap.release_all()
    host_arrays.clear()
    state.device = None
    return ACL_SUCCESS


def get_soc_name() -> str:
    """The SoC the current device reports (ACLNN_SOC at set_device; default Ascend910B).

    >>> acl.get_soc_name()
    'Ascend910B'
    """
    return state.soc_name


def get_contract() -> str:
    """The contract the operators answer by: "library" (what the real library does on the
    SoC, the default) or "documented" (the pages); ACLNN_CONTRACT at set_device.

    >>> acl.get_contract()
    'library'
    """
    return state.contract


def set_contract(name: str) -> None:
    """Switch the contract in this process (tests, notebooks); ValueError for an unknown name.

    >>> acl.set_contract("documented")
    """
    if name not in CONTRACTS:
        raise ValueError(f"set_contract: name must be one of {list(CONTRACTS)}, got {name!r}")
    state.contract = name


def get_recent_err_msg() -> str:
    """This thread's most recent failure message ("" if none).

    >>> acl.rt.set_device(8)  # devices are 0..7
    107001
    >>> acl.get_recent_err_msg()
    'set_device: device_id must be in [0, 8), got 8'
    """
    return get_recent_error()
