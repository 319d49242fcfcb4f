"""Array interchange for the functional API: NumPy arrays, PyTorch CPU tensors and any
`__dlpack__` object in; the caller's kind of array out. Conversions share memory."""

from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np

from ..framework.status import ParamInvalidError

BF16 = np.dtype(ml_dtypes.bfloat16)


def is_torch_tensor(obj: Any) -> bool:
    """Whether `obj` is a torch.Tensor (checked without importing torch)."""
    return type(obj).__module__.split(".")[0] == "torch" and hasattr(obj, "untyped_storage")


def as_numpy(obj: Any, name: str, where: str) -> np.ndarray:
    """`obj` as a NumPy array sharing its memory: an ndarray as is, a CPU torch.Tensor
    through `.numpy()` (bfloat16 through an int16 view), a `__dlpack__` object through
    `np.from_dlpack`; anything else through `np.asarray`."""
    if isinstance(obj, np.ndarray):
        return obj
    if is_torch_tensor(obj):
        import torch

        if obj.device.type != "cpu":
            raise ParamInvalidError(f"{where}: {name} must be a CPU tensor, got one on "
                                    f"{obj.device}.")
        tensor = obj.detach().resolve_conj().resolve_neg()
        if tensor.dtype == torch.bfloat16:
            return tensor.view(torch.int16).numpy().view(BF16)
        return tensor.numpy()
    if hasattr(obj, "__dlpack__"):
        try:
            return np.from_dlpack(obj)
        except (TypeError, BufferError, RuntimeError) as exc:
            raise ParamInvalidError(f"{where}: {name} cannot be read through DLPack: "
                                    f"{exc}.") from None
    try:
        return np.asarray(obj)
    except (TypeError, ValueError) as exc:
        raise ParamInvalidError(f"{where}: {name} must be an array, got "
                                f"{type(obj).__name__}: {exc}.") from None


def like(result: np.ndarray, torch_wanted: bool):
    """`result` as a torch.Tensor sharing its memory if wanted, else as is."""
    if not torch_wanted:
        return result
    import torch

    if result.dtype == BF16:
        return torch.from_numpy(result.view(np.int16)).view(torch.bfloat16)
    return torch.from_numpy(result)
