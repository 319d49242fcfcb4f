"""Process state of the runtime: initialisation, the current device and its SoC."""

from __future__ import annotations

import os
import threading

SOC_NAMES = ("Ascend910", "Ascend310P", "Ascend910B", "Ascend910_93", "Ascend950")
DEFAULT_SOC = "Ascend910B"
DEVICE_COUNT = 8
SOC_ENV = "ACLNN_SOC"
CONTRACTS = ("library", "documented")
DEFAULT_CONTRACT = "library"
CONTRACT_ENV = "ACLNN_CONTRACT"


class RuntimeState:
    """Initialisation flag, current device id, the SoC the device reports and the contract
    its operators answer by (SPEC §14)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.initialized = False
        self.device: int | None = None
        self.soc_name = DEFAULT_SOC
        self.contract = DEFAULT_CONTRACT


state = RuntimeState()


def soc_from_environment() -> str | None:
    """The SoC named by ACLNN_SOC (default Ascend910B), or None if the name is unknown."""
    name = os.environ.get(SOC_ENV, DEFAULT_SOC) or DEFAULT_SOC
    return name if name in SOC_NAMES else None


def contract_from_environment() -> str | None:
    """The contract named by ACLNN_CONTRACT (default library), or None if it is unknown."""
    name = os.environ.get(CONTRACT_ENV, DEFAULT_CONTRACT) or DEFAULT_CONTRACT
    return name if name in CONTRACTS else None
