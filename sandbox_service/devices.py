"""Which backend this machine runs (CUDA GPUs when there are any, else the Triton interpreter on the CPU), and
what a GPU has free now."""

from __future__ import annotations

import ctypes
import dataclasses
import logging
import os
import platform
from collections.abc import Callable

log = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class BackendInfo:
    backend: str  # "cuda" or "interpreter"
    gpus: tuple[int, ...]
    device_names: tuple[str, ...]
    python_version: str
    torch_version: str
    triton_version: str


class BackendUnavailable(RuntimeError):
    """The backend asked for does not exist on this machine (the user's choice to change, not a crash)."""


def resolve_backend(requested: str = "auto", gpus: list[int] | None = None) -> BackendInfo:
    """Resolve "auto" | "cuda" | "interpreter"; a cuda request without a GPU is an error, not a fallback."""
    if requested not in ("auto", "cuda", "interpreter"):
        raise ValueError(f"backend must be auto, cuda or interpreter, got {requested!r}")
    import torch
    import triton

    count = torch.cuda.device_count() if os.environ.get("TRITON_INTERPRET") != "1" else 0
    if requested == "cuda" and count == 0:
        raise BackendUnavailable("--backend cuda was asked for, but no CUDA GPU is visible (use --backend interpreter "
                                 "or auto, or run on a machine with a GPU)")
    backend = "cuda" if requested == "cuda" or (requested == "auto" and count > 0) else "interpreter"
    if backend == "cuda":
        chosen = tuple(gpus) if gpus else tuple(range(count))
        bad = [g for g in chosen if not 0 <= g < count]
        if bad:
            raise ValueError(f"GPUs {bad} do not exist (this machine has {count})")
        names = tuple(torch.cuda.get_device_name(g) for g in chosen)
    else:
        chosen, names = (), ("cpu (triton interpreter)",)
    return BackendInfo(backend, chosen, names, platform.python_version(), torch.__version__, triton.__version__)


_PAGEABLE_MEMORY_ACCESS = 88  # CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS


def reaches_pageable_host_memory(gpu: int) -> bool | None:
    """Whether kernels on `gpu` can address a process's ordinary (pageable) host memory, as on machines with
    HMM or ATS (CUDA's pageable-memory-access attribute); None when the driver cannot be asked. Where they
    can, nothing of the executor's own process is out of its kernels' reach (docs/security.md)."""
    found = _cuda_device(gpu)
    if found is None:
        return None
    cuda, device = found
    value = ctypes.c_int()
    if cuda.cuDeviceGetAttribute(ctypes.byref(value), _PAGEABLE_MEMORY_ACCESS, device) != 0:
        return None
    return bool(value.value)


def _cuda_device(gpu: int) -> tuple[ctypes.CDLL, ctypes.c_int] | None:
    """The CUDA driver and its handle of device `gpu` (as this process numbers it), asked without torch and
    without making a context; None when there is no driver or no such device."""
    try:
        cuda = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return None
    device = ctypes.c_int()
    if cuda.cuInit(0) != 0 or cuda.cuDeviceGet(ctypes.byref(device), gpu) != 0:
        return None
    return cuda, device


@dataclasses.dataclass(frozen=True)
class DeviceMemory:
    """A GPU's memory as its driver counts it, every process's allocations and contexts included."""

    free: int
    total: int


class _NvmlMemory(ctypes.Structure):
    _fields_ = [("total", ctypes.c_ulonglong), ("free", ctypes.c_ulonglong), ("used", ctypes.c_ulonglong)]


def device_memory_reader(gpu: int) -> Callable[[], DeviceMemory | None] | None:
    """A function that reads what CUDA device `gpu` (as this process numbers it) has free now, through NVML,
    which needs no CUDA context in the caller (a server need not hold one, at about 500 MB of the GPU). The
    device is found by its PCI bus id, which CUDA_VISIBLE_DEVICES does not renumber. None when NVML or the
    driver cannot be asked; the function answers None when a read fails."""
    found = _cuda_device(gpu)
    if found is None:
        return None
    try:
        nvml = ctypes.CDLL("libnvidia-ml.so.1")
    except OSError:
        return None
    cuda, device = found
    bus, handle = ctypes.create_string_buffer(64), ctypes.c_void_p()
    if cuda.cuDeviceGetPCIBusId(bus, len(bus), device) != 0 or nvml.nvmlInit_v2() != 0 or \
            nvml.nvmlDeviceGetHandleByPciBusId_v2(bus.value, ctypes.byref(handle)) != 0:
        return None

    def read() -> DeviceMemory | None:
        memory = _NvmlMemory()
        if nvml.nvmlDeviceGetMemoryInfo(handle, ctypes.byref(memory)) != 0:
            log.warning("NVML could not read GPU %s's memory", gpu)
            return None
        return DeviceMemory(int(memory.free), int(memory.total))

    return read if read() is not None else None
