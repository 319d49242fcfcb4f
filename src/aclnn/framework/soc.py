"""SoC profiles: what each Ascend chip supports, as the operators need to know it."""

from __future__ import annotations

from dataclasses import dataclass

from ..acl import get_contract, get_soc_name
from ..dtypes import aclDataType as D


@dataclass(frozen=True)
class SocProfile:
    """Capabilities of one SoC.

    `bf16`: BFLOAT16 tensors are supported. `cube_fp32`: the cube unit computes FLOAT
    natively (False on Ascend910/310P, which need cubeMathType to allow down-precision).
    `down_precision`: what ALLOW_FP32_DOWN_PRECISION turns FLOAT into ("fp16" or "hf32").
    """

    name: str
    series: str
    bf16: bool
    cube_fp32: bool
    down_precision: str

    def float_dtypes(self) -> tuple[D, ...]:
        """The floating dtypes these operators accept on this SoC."""
        base = (D.ACL_FLOAT, D.ACL_FLOAT16)
        return (*base, D.ACL_BF16) if self.bf16 else base


PROFILES = {
    p.name: p
    for p in (
        SocProfile("Ascend910", "Atlas training series", False, False, "fp16"),
        SocProfile("Ascend310P", "Atlas inference series", False, False, "fp16"),
        SocProfile("Ascend910B", "Atlas A2 training/inference series", True, True, "hf32"),
        SocProfile("Ascend910_93", "Atlas A3 training/inference series", True, True, "hf32"),
        SocProfile("Ascend950", "Ascend 950PR/950DT", True, True, "hf32"),
    )
}


def current_soc() -> SocProfile:
    """The profile of the SoC the runtime's current device reports."""
    return PROFILES[get_soc_name()]


def library_contract() -> bool:
    """Whether the operators answer as the real library does (SPEC §14), not as the pages."""
    return get_contract() == "library"
