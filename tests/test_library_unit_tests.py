"""The real library's public op_api unit tests of our four operators, as our own table of
calls, answered under the library contract (ACLNN_CONTRACT=library).

Source: the op_api UTs of the open CANN operator repository hicann/ops-nn (commit e5c3fa93):
activation/gelu_grad_v2/tests/ut/op_api/test_gelu_backward_v2.cpp,
loss/l1_loss_grad/tests/ut/op_api/test_aclnn_l1_loss_backward.cpp,
loss/smooth_l1_loss_grad_v2/tests/ut/op_api/test_aclnn_smooth_l1_loss_backward_l2.cpp and
pooling/avg_pool3_d_grad/tests/ut/op_api/test_aclnn_avgpool2dbackward.cpp. Each row is one
phase-1 call of a UT (a TEST_F that loops or calls several times gives several rows, ids
`NAME-k`), with the status the UT expects; where it expects success, phase 2 runs too (a
workspace of the size phase 1 gave) and must return 0 after a synchronize.

SoC: the op_api UT binary links tests/ut/op_api/stub/opdev/platform.cpp, whose SoC is
Ascend910B (arch DAV_2201) unless a test switches it with op::SocVersionManager; only
ascend310P_test_avgpool2dbackwardbackward_global_avg_pool_bf16 does (Ascend310P). A name's
prefix is not a switch: the ascend950_* and ascend910B2_* tests run on Ascend910B.

Not translated: activation/gelu_grad_v2/tests/ut/op_host/op_api/test_gelu_backward_v2.cpp
holds the same 24 tests (001-024, identical calls and expectations) as the first 24 of the
op_api file, so those rows stand for both; 3 AvgPool2dBackward TEST_Fs are commented out in
the source (their -1 dims cannot even be created here). No UT passes nullptr for the
workspaceSize/executor out-params (0 calls left out for that). Values the UTs set (Value,
ValueRange) do not decide a status; tensors here hold small deterministic values. Storage
dims, strides and offset are the UT's; tensors of an empty storage get a null data address
(as every UT tensor has). The largest tensor (AvgPool's 8x192x64x64 FLOAT16) is 12 MiB.
DT_UNDEFINED is CANN's -1, which aclnn has no constant for.
"""

from __future__ import annotations

from typing import NamedTuple

import ml_dtypes
import numpy as np
import pytest

import aclnn
from aclnn import acl

OK, NULLPTR, INVALID = 0, 161001, 161002
B, P310 = "Ascend910B", "Ascend310P"
DT_UNDEFINED = -1

DTYPES = {  # short name -> (aclDataType, NumPy storage dtype)
    "f32": (aclnn.ACL_FLOAT, np.float32), "f16": (aclnn.ACL_FLOAT16, np.float16),
    "bf16": (aclnn.ACL_BF16, ml_dtypes.bfloat16), "f64": (aclnn.ACL_DOUBLE, np.float64),
    "s32": (aclnn.ACL_INT32, np.int32), "s16": (aclnn.ACL_INT16, np.int16),
    "c64": (aclnn.ACL_COMPLEX64, np.complex64), "c128": (aclnn.ACL_COMPLEX128, np.complex128),
    "undef": (DT_UNDEFINED, np.float32),
}
FORMATS = {name: getattr(aclnn, f"ACL_FORMAT_{name}") for name in (
    "ND", "NCHW", "NHWC", "HWCN", "NDHWC", "NCDHW", "NCL", "NC1HWC0", "FRACTAL_NZ")}


class T(NamedTuple):
    """A tensor of a UT: view shape, dtype, format, strides, offset, storage dims."""

    shape: tuple
    dt: str = "f32"
    fmt: str = "ND"
    strides: tuple | None = None
    offset: int = 0
    storage: tuple | None = None


class IA(NamedTuple):
    """An aclIntArray of a UT."""

    values: tuple


def tr(shape: tuple, dt: str = "f32") -> T:
    """The UTs' non-contiguous 2-D view: `shape` viewing a transposed storage."""
    return T(shape, dt, strides=(1, shape[0]), storage=(shape[1], shape[0]))


def row(name: str, soc: str, args: tuple, expect: int):
    return pytest.param(soc, args, expect, id=name)


# ---------------------------------------------------------------- aclnnGeluBackwardV2
# args: gradOutput, self, approximate, gradInput
X = T((1, 16, 1, 1))
GV = "gelu_backward_v2_testcase_"
GELU = [
    row(GV + "001_normal_float32", B, (T((2, 5)), T((2, 5)), "none", T((2, 5))), OK),
    row(GV + "002_normal_float16", B,
        (T((2, 5), "f16"), T((2, 5), "f16"), "tanh", T((2, 5), "f16")), OK),
    row(GV + "003_normal_empty_tensor", B, (T((0,)), T((0,)), "tanh", T((0,))), OK),
    row(GV + "004_exception_null_gradOutput", B, (None, X, "none", X), NULLPTR),
    row(GV + "005_exception_null_self", B, (X, None, "none", X), NULLPTR),
    row(GV + "006_exception_null_approximate", B, (X, X, None, X), NULLPTR),
    row(GV + "007_exception_null_gradInput", B, (X, X, "none", None), NULLPTR),
    row(GV + "008_exception_float64_dtype_not_supported", B,
        (T((1, 16, 1, 1), "f64"), X, "none", T((1, 16, 1, 1), "f64")), INVALID),
    row(GV + "009_normal_dtype_not_the_same", B,
        (X, T((1, 16, 1, 1), "f16"), "none", X), OK),
    row(GV + "010_normal_dtype_not_the_same", B,
        (T((1, 16, 1, 1), "f16"), X, "none", X), OK),
    row(GV + "011_normal_dtype_not_the_same", B,
        (T((1, 16, 1, 1), "f16"), X, "test", X), INVALID),
    *[row(GV + f"012_normal_format-{fmt}", B,
          (T((1, 16, 1, 1), fmt=fmt),) * 2 + ("none", T((1, 16, 1, 1), fmt=fmt)), OK)
      for fmt in ("ND", "NC1HWC0", "FRACTAL_NZ")],
    row(GV + "013_normal_format", B,
        (X, T((1, 16, 1, 1), fmt="NCHW"), "tanh", X), OK),
    row(GV + "014_normal_different_format", B,
        (X, T((1, 16, 1, 1), fmt="NC1HWC0"), "none", X), OK),
    row(GV + "015_exception_different_shape", B,
        (X, T((1, 1, 4, 4)), "tanh", X), INVALID),
    row(GV + "016_normal_not_contiguous_float", B,
        (tr((2, 5)), tr((2, 5)), "none", tr((2, 5))), OK),
    row(GV + "017_normal_not_contiguous_float16", B,
        (tr((2, 5), "f16"), tr((2, 5), "f16"), "none", tr((2, 5), "f16")), OK),
    row(GV + "018_exception_complex64_dtype_not_supported", B,
        (T((1, 16, 1, 1), "c64"),) * 2 + ("tanh", T((1, 16, 1, 1), "c64")), INVALID),
    row(GV + "019_exception_complex128_dtype_not_supported", B,
        (T((1, 16, 1, 1), "c128"),) * 2 + ("tanh", T((1, 16, 1, 1), "c128")), INVALID),
    row(GV + "020_normal_large_dims", B,
        (T((1,) + (2,) * 8), T((1,) + (2,) * 8), "none", T((1,) + (2,) * 8)), OK),
    row(GV + "021_normal_self_empty_tensor", B,
        (T((16, 16)), T((0,)), "tanh", T((16, 16))), INVALID),
    row(GV + "022_exception_gradOutput_empty_tensor", B,
        (T((0,)), T((16, 16)), "tanh", T((0,))), INVALID),
    row(GV + "023_normal_broadcast_shape", B,
        (T((16,)), T((16, 16)), "tanh", T((16, 16))), OK),
    row(GV + "024_normal_broadcast_shape", B,
        (T((16, 5, 5)), T((5, 5)), "tanh", T((16, 5, 5))), OK),
    row(GV + "025_large_shape", B,
        (T((1024, 1024)), T((1024, 1024)), "none", T((1024, 1024))), OK),
    row(GV + "026_5d_shape", B,
        (T((2, 4, 8, 16, 32), "f16"),) * 2 + ("tanh", T((2, 4, 8, 16, 32), "f16")), OK),
    row(GV + "027_scalar", B, (T(()), T(()), "none", T(())), OK),
    row(GV + "028_nchw_format", B,
        (T((2, 64, 112, 112), "f16", "NCHW"),) * 2
        + ("none", T((2, 64, 112, 112), "f16", "NCHW")), OK),
    row(GV + "029_specific_values", B, (T((8,)), T((8,)), "none", T((8,))), OK),
    row(GV + "030_bf16_dtype", B,
        (T((2, 4, 6, 8), "bf16"),) * 2 + ("tanh", T((2, 4, 6, 8), "bf16")), OK),
    row(GV + "031_int_dtype", B,
        (T((2, 4), "s32"), T((2, 4), "s32"), "none", T((2, 4), "s32")), INVALID),
    row(GV + "032_undefined_dtype", B,
        (T((2, 4), "undef"), T((2, 4), "undef"), "none", T((2, 4), "undef")), INVALID),
    row(GV + "033_7d_shape", B,
        (T((1, 2, 3, 4, 5, 6, 7)), T((1, 2, 3, 4, 5, 6, 7)), "none", T((1, 2, 3, 4, 5, 6, 7))), OK),
]

# ---------------------------------------------------------------- aclnnL1LossBackward
# args: gradOutput, self, target, reduction, gradInput
E4 = (T((1, 0, 1, 2)), T((1, 1, 0, 2)), T((1, 0, 1, 2)))
S3 = (T((123, 11, 2)), T((123, 11, 2)))
N9, N4i, N4f = (2, 3, 4, 5, 6, 7, 8, 9, 10), T((7, 8, 9, 10), "s16"), T((7, 8, 9, 10))
L1 = [
    row("aclnnL1LossBackward_01_float_nd_none", B,
        (T((2, 2, 3, 2)), T((1, 2, 3, 2)), T((2, 2, 1, 2)), 0, T((2, 2, 3, 2))), OK),
    row("aclnnL1LossBackward_02_float16_nchw_mean", B,
        (T((1, 3, 2), "f16"), T((2, 3, 2), "f16", "NCHW"), T((3, 2), "f16", "NCHW"), 1,
         T((2, 3, 2), "f16", "NCHW")), OK),
    row("aclnnL1LossBackward_03_float_float16_ND_sum", B,
        (T((2, 2)), T((2, 2)), T((2, 2)), 2, T((2, 2), "f16")), OK),
    row("aclnnL1LossBackward_04_float16_float_ND_mean", B,
        (T((2, 2), "f16"), T((2, 2), "f16"), T((2, 2), "f16"), 1, T((2, 2))), OK),
    *[row(f"aclnnL1LossBackward_0{5 + r}_float_nd_empty_tensor_{name}", B,
          (*E4, r, T((1, 0, 0, 2))), OK) for r, name in enumerate(("none", "mean", "sum"))],
    row("aclnnL1LossBackward_08_float_nd_out_shape_sum", B,
        (T((1, 1, 1, 2)), T((1, 1, 1, 2)), T((1, 1, 1, 2)), 2, T((1, 0, 0, 2))), INVALID),
    row("aclnnL1LossBackward_09_float_ND_input_not_contiguous", B,
        (tr((5, 4)), tr((5, 4)), tr((5, 4)), 0, T((5, 4))), OK),
    row("aclnnL1LossBackward_10_float_ND_out_not_contiguous", B,
        (T((5, 4)), T((5, 4)), T((5, 4)), 0, tr((5, 4))), OK),
    row("aclnnL1LossBackward_11_float_ND_in_out_not_contiguous", B,
        (T((5, 4)), T((5, 4)), tr((5, 4)), 0, tr((5, 4))), OK),
    row("aclnnL1LossBackward_12_reduction_error", B,
        (T((8,)), T((8,)), T((8,)), 3, T((8,))), INVALID),
    *[row(f"aclnnL1LossBackward_13_input_out_nullptr-{k}", B,
          tuple(None if i == pos else (0 if i == 3 else T((10, 5)))
                for i in range(5)), NULLPTR)
      for k, pos in enumerate((0, 1, 2, 4))],
    row("aclnnL1LossBackward_14_aclnnL1LossBackward_input_error_shape", B,
        (*S3, T((123, 8, 2)), 0, T((123, 11, 2))), INVALID),
    row("aclnnL1LossBackward_15_aclnnL1LossBackward_error_output_dtype", B,
        (T((6, 2, 1, 2)),) * 3 + (0, T((6, 2, 1, 2), "s32")), INVALID),
    row("aclnnL1LossBackward_16_aclnnL1LossBackward_error_input_dtype", B,
        (T((6, 2, 1, 2), "s32"),) * 3 + (0, T((6, 2, 1, 2))), INVALID),
    row("aclnnL1LossBackward_18_aclnnL1LossBackward_input_error_shape_len-0", B,
        (T(N9, "s32"), N4i, N4i, 0, N4i), INVALID),
    row("aclnnL1LossBackward_18_aclnnL1LossBackward_input_error_shape_len-1", B,
        (N4i, T(N9, "s32"), N4i, 0, N4i), INVALID),
    row("aclnnL1LossBackward_18_aclnnL1LossBackward_input_error_shape_len-2", B,
        (N4i, N4i, T(N9, "s32"), 0, N4i), INVALID),
    row("aclnnL1LossBackward_19_float_ND_ND_mean", B,
        (T((2, 2)), T((2, 2)), T((2, 2)), 1, T((2, 2))), OK),
    row("aclnnL1LossBackward_20_aclnnL1LossBackward_output_error_shape_none", B,
        (T((123, 11, 2)), T((123, 1, 2)), T((123, 11, 1)), 0, T((123, 8, 2))), INVALID),
    row("aclnnL1LossBackward_21_aclnnL1LossBackward_input_error_shape", B,
        (T((123, 11, 2)), T((123, 8, 2)), T((123, 11, 2)), 0, T((123, 11, 2))), INVALID),
    *[row(f"aclnnL1LossBackward_22_aclnnL1LossBackward_input_error_shape_len-{k}", B,
          tuple(T(N9) if i == k else (0 if i == 3 else N4f) for i in range(5)), INVALID)
      for k in range(3)],
    row("ascend950_aclnnL1LossBackward_input_scalar_grads", B,
        (T(()), T((2, 2)), T((2, 2)), 1, T((2, 2))), OK),
]

# ---------------------------------------------------------------- aclnnSmoothL1LossBackward
# args: gradOutput, self, target, reduction, beta, gradInput
Z = T((1, 0, 4, 1))
Q = T((1, 4, 4, 1))


def same3(shape: tuple, dt: str, reduction: int, beta: float = 1.0, out: T | None = None) -> tuple:
    """gradOutput, self, target all `shape`/`dt`; gradInput `out` (default: the same)."""
    t = T(shape, dt)
    return (t, t, t, reduction, beta, t if out is None else out)


def bcast(dt: str, reduction: int) -> tuple:
    """The UTs' broadcast of an empty gradOutput [1,0,4,1] with self [4,1], target [1,4,2]."""
    return (T((1, 0, 4, 1), dt), T((4, 1), dt), T((1, 4, 2), dt), reduction, 1.0,
            T((1, 0, 4, 2), dt))


BAD_DT = ("f32", "f32", "f32", "f64")
SL1 = [
    row("case_normal", B, same3((1,), "f32", 0), OK),
    *[row(f"case_nullptr-{k}", B,
          tuple(None if i == pos else {3: 0, 4: 1.0}.get(i, Z) for i in range(6)), NULLPTR)
      for k, pos in enumerate((0, 1, 2, 5))],
    row("case_empty_tensor", B, same3(Z.shape, "f32", 0), OK),
    row("case_dtype_float", B, same3(Q.shape, "f32", 0), OK),
    row("case_dtype_float16", B, same3(Q.shape, "f16", 0), OK),
    row("case_dtype_promote", B,
        (T(Q.shape, "f16"), Q, T(Q.shape, "f16"), 0, 1.0, T(Q.shape, "f16")), OK),
    *[row(f"case_dtype_invalid-{i}", B,
          (T(Q.shape, BAD_DT[i % 4]), T(Q.shape, BAD_DT[(i + 1) % 4]),
           T(Q.shape, BAD_DT[(i + 2) % 4]), 0, 1.0, T(Q.shape, BAD_DT[(i + 3) % 4])), INVALID)
      for i in range(4)],
    row("case_dim", B, same3((1, 1, 4, 1, 1, 1, 1, 1, 1), "f32", 0), INVALID),
    *[row(f"case_reduction-{r}", B, same3((1, 1, 4, 1), "f32", r), OK if r < 3 else INVALID)
      for r in range(4)],
    row("case_broadcast_succ_1", B, bcast("f32", 0), OK),
    row("case_broadcast_succ_2", B,
        (T((1, 2, 4, 1)), T((4, 1)), T((1, 4, 2)), 0, 1.0, T((1, 2, 4, 2))), OK),
    row("case_broadcast_fail_1", B,
        (T((1, 1, 4, 1)), T((3, 3)), T((1, 4, 2)), 0, 1.0, T((1, 1, 4, 2))), INVALID),
    row("case_broadcast_fail_2", B,
        (T((1, 1, 4, 1)), T((4, 3)), T((1, 4, 2)), 0, 1.0, T((1, 1, 4, 3))), INVALID),
    row("case_beta", B,
        (T((1, 1, 4, 1)), T((4, 2)), T((1, 4, 2)), 0, -1.0, T((1, 1, 4, 2))), INVALID),
    row("case_not_contiguous", B, (tr((5, 4)), tr((5, 4)), tr((5, 4)), 0, 1.0, tr((5, 4))), OK),
    *[row(f"case_format-{fmt}", B,
          (T((1, 1, 4, 4), fmt=fmt),) * 3 + (0, 1.0, T((1, 1, 4, 4), fmt=fmt)), OK)
      for fmt in ("NCHW", "NHWC", "ND", "HWCN", "NDHWC", "NCDHW", "NCL")],
    row("ascend910B2_case_dtype_bfloat16", B, same3(Q.shape, "bf16", 0), OK),
    row("ascend950_case_empty_tensor", B, same3(Z.shape, "f32", 0), OK),
    *[row(f"ascend950_case_reduction_dtype_{name}-{r}", B, same3((1, 1, 4, 1), dt, r),
          OK if r < 3 else INVALID)
      for name, dt in (("float32", "f32"), ("float16", "f16"), ("bfloat16", "bf16"))
      for r in range(4)],
    *[row(f"ascend950_case_scalar_reduction_dtype_{name}-{r}", B, bcast(dt, r),
          OK if r < 3 else INVALID)
      for name, dt in (("float32", "f32"), ("float16", "f16"), ("bfloat16", "bf16"))
      for r in range(4)],
]

# ---------------------------------------------------------------- aclnnAvgPool2dBackward
# args: gradOutput, self, kernelSize, stride, padding, ceilMode, countIncludePad,
#       divisorOverride, cubeMathType, gradInput
G8, S16 = T((1, 1, 8, 8), fmt="NCHW"), T((1, 1, 16, 16), fmt="NCHW")
AVG = [
    row("ascend910B2_test_avgpool2dbackward_kernelSize_illegal_shape", B,
        (G8, S16, IA((-4, 4)), IA((2, 2)), IA((2, 2)), True, False, 0, 1, S16), INVALID),
    row("ascend910B2_test_avgpool2dbackward_stride_illegal_shape", B,
        (G8, S16, IA((4, 4)), IA((-2, 2)), IA((2, 2)), True, False, 0, 1, S16), INVALID),
    row("ascend910B2_test_avgpool2dbackward_kernel_size_empty", B,
        (T((8, 192, 1, 1), "f16", "NCHW"), T((8, 192, 64, 64), "f16", "NCHW"), IA(()),
         IA((0, 0)), IA((0, 0)), False, False, 0, 1, T((8, 192, 64, 64), "f16", "NCHW")), INVALID),
    row("ascend310P_test_avgpool2dbackwardbackward_global_avg_pool_bf16", P310,
        (T((5, 4, 6, 6), "bf16", "NCHW"), T((5, 4, 13, 13), "bf16", "NCHW"), IA((3, 3)),
         IA((2, 2)), IA((1, 1)), False, False, 300, 0, T((5, 4, 13, 13), "bf16", "NCHW")), INVALID),
]

OPS = {
    "GeluBackwardV2": GELU,
    "L1LossBackward": L1,
    "SmoothL1LossBackward": SL1,
    "AvgPool2dBackward": AVG,
}


class Built:
    """Device memory, tensors and int arrays made for one call; `release` frees them."""

    def __init__(self) -> None:
        self.ptrs: list[int] = []
        self.tensors: list = []
        self.arrays: list = []

    def tensor(self, spec: T):
        """An aclTensor of `spec` over fresh device memory holding small values."""
        acl_dt, np_dt = DTYPES[spec.dt]
        storage = spec.shape if spec.storage is None else spec.storage
        numel = int(np.prod(storage, dtype=np.int64))
        ptr = None
        if numel:
            values = (np.arange(numel) % 7 - 3).astype(np.float32) / 4
            host = np.ascontiguousarray(values.astype(np_dt))
            ptr, ret = acl.rt.malloc(host.nbytes, acl.ACL_MEM_MALLOC_HUGE_FIRST)
            assert ret == 0
            self.ptrs.append(ptr)
            assert acl.rt.memcpy(ptr, host.nbytes, acl.util.numpy_to_ptr(host), host.nbytes,
                                 acl.ACL_MEMCPY_HOST_TO_DEVICE) == 0
        t = aclnn.aclCreateTensor(list(spec.shape), acl_dt, spec.strides and list(spec.strides),
                                  spec.offset, FORMATS[spec.fmt], list(storage), ptr)
        assert t is not None, f"aclCreateTensor({spec}) failed: {aclnn.aclGetRecentErrMsg()}"
        self.tensors.append(t)
        return t

    def arg(self, a):
        """The call argument for a table entry: tensor, int array, or the value itself."""
        if isinstance(a, T):
            return self.tensor(a)
        if isinstance(a, IA):
            arr = aclnn.aclCreateIntArray(list(a.values))
            assert arr is not None, aclnn.aclGetRecentErrMsg()
            self.arrays.append(arr)
            return arr
        return a

    def release(self) -> None:
        """Destroy what was made and free the memory."""
        for t in self.tensors:
            aclnn.aclDestroyTensor(t)
        for arr in self.arrays:
            aclnn.aclDestroyIntArray(arr)
        for ptr in self.ptrs:
            acl.rt.free(ptr)


@pytest.fixture
def built():
    """A `Built` for one test, released afterwards."""
    b = Built()
    yield b
    b.release()


@pytest.mark.parametrize(
    ("op", "soc", "args", "expect"),
    [pytest.param(op, *p.values, id=f"{op}/{p.id}") for op, rows in OPS.items() for p in rows],
)
def test_library_unit_test_call(op, soc, args, expect, built, use_soc, use_contract):
    use_contract("library")
    use_soc(soc)
    get_ws = getattr(aclnn, f"aclnn{op}GetWorkspaceSize")
    ws, executor, ret = get_ws(*(built.arg(a) for a in args))
    msg = aclnn.aclGetRecentErrMsg()
    assert ret == expect, f"aclnn{op} phase 1 on {soc}: status {ret}, UT expects {expect}; {msg!r}"
    if expect != OK:
        assert executor is None
        return
    assert executor is not None
    workspace = None
    if ws > 0:
        workspace, r = acl.rt.malloc(ws, acl.ACL_MEM_MALLOC_HUGE_FIRST)
        assert r == 0
    try:
        ret = getattr(aclnn, f"aclnn{op}")(workspace, ws, executor, None)
        assert ret == 0, f"phase 2: status {ret}; {aclnn.aclGetRecentErrMsg()!r}"
        assert acl.rt.synchronize_stream(None) == 0
    finally:
        if workspace is not None:
            acl.rt.free(workspace)
