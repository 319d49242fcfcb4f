"""Dtype promotion (the CANN "互推导关系" table) and castability, as PyTorch defines them.

Promotion over {f32, f16, f64, bf16, s8, u8, s16, s32, s64, bool, c32, c64, c128} equals
`torch.promote_types`; u16, u32 and u64 promote only with themselves.
"""

from __future__ import annotations

from ..dtypes import aclDataType as D
from ..dtypes import is_complex, is_floating

_SIGNED = (D.ACL_INT8, D.ACL_INT16, D.ACL_INT32, D.ACL_INT64)
_UNSIGNED_ISOLATED = (D.ACL_UINT16, D.ACL_UINT32, D.ACL_UINT64)
_COMPLEX_OF_FLOAT = {D.ACL_FLOAT16: D.ACL_COMPLEX32, D.ACL_FLOAT: D.ACL_COMPLEX64,
                     D.ACL_DOUBLE: D.ACL_COMPLEX128}
_FLOAT_OF_COMPLEX = {v: k for k, v in _COMPLEX_OF_FLOAT.items()}
_FLOAT_RANK = {D.ACL_FLOAT16: 0, D.ACL_BF16: 0, D.ACL_FLOAT: 1, D.ACL_DOUBLE: 2}


def _promote_ints(a: D, b: D) -> D:
    if a == D.ACL_UINT8 or b == D.ACL_UINT8:
        signed = b if a == D.ACL_UINT8 else a
        return D.ACL_INT16 if signed == D.ACL_INT8 else signed
    return max(a, b, key=_SIGNED.index)


def _promote_floats(a: D, b: D) -> D:
    if {a, b} == {D.ACL_FLOAT16, D.ACL_BF16}:
        return D.ACL_FLOAT
    return max(a, b, key=_FLOAT_RANK.__getitem__)


def _promote_pair(a: D, b: D) -> D | None:
    if D.ACL_DT_UNDEFINED in (a, b):
        return None
    if a == b:
        return a
    if a in _UNSIGNED_ISOLATED or b in _UNSIGNED_ISOLATED:
        return None
    if a == D.ACL_BOOL or b == D.ACL_BOOL:
        return b if a == D.ACL_BOOL else a
    if is_complex(a) or is_complex(b):
        if is_complex(a) and is_complex(b):
            return max(a, b, key=lambda t: _FLOAT_RANK[_FLOAT_OF_COMPLEX[t]])
        cplx, other = (a, b) if is_complex(a) else (b, a)
        if not is_floating(other):
            return cplx
        return _COMPLEX_OF_FLOAT[_promote_floats(_FLOAT_OF_COMPLEX[cplx], other)]
    if is_floating(a) or is_floating(b):
        if is_floating(a) and is_floating(b):
            return _promote_floats(a, b)
        return a if is_floating(a) else b
    return _promote_ints(a, b)


_TABLE = {(a, b): _promote_pair(a, b) for a in D for b in D}


def promote_types(a: int, b: int) -> D | None:
    """The promoted dtype of `a` and `b`, or None when they cannot promote."""
    return _TABLE[a, b]


def promote_all(*dtypes: int) -> D | None:
    """Promote left to right; None as soon as a pair cannot promote."""
    result = dtypes[0]
    for dtype in dtypes[1:]:
        result = promote_types(result, dtype)
        if result is None:
            return None
    return result


def can_cast(src: int, dst: int) -> bool:
    """Whether `src` may be written to a `dst` output: no float/complex -> integer/bool and
    no complex -> real."""
    src_inexact = is_floating(src) or is_complex(src)
    dst_inexact = is_floating(dst) or is_complex(dst)
    if src_inexact and not dst_inexact:
        return False
    return not (is_complex(src) and not is_complex(dst))
