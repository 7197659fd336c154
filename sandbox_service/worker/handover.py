"""Handing a trial's outputs from the candidate's process to the judge's.

Small outputs go through a safetensors file in the evaluation's folder (memory-backed when /dev/shm has
room). Large CUDA outputs stay on the GPU: the candidate exports CUDA IPC handles, the server freezes
the candidate (SIGSTOP) while the judge maps and compares them, and the judge fingerprints what it read
so that a change after the hand-over is caught. No pickle crosses a process boundary: handles travel as
hex strings with the tensor's dtype, shape, strides and offset, and the judge checks their bounds.
"""

from __future__ import annotations

from pathlib import Path

import torch

from sandbox_service.correctness import dtype_name
from sandbox_service.worker import harness

FILE = "file"
IPC = "ipc"
_IPC_FIELDS = ("int", "bytes", "int", "int", "bytes", "int", "bytes", "bool")


def total_bytes(tensors: list[torch.Tensor]) -> int:
    return sum(t.numel() * t.element_size() for t in tensors)


def export_outputs(tensors: list[torch.Tensor], path: Path, ipc_min_bytes: int | None) -> dict:
    """A description of where the outputs are; IPC when asked for, possible and worth it, else a file."""
    if ipc_min_bytes is not None and tensors and total_bytes(tensors) >= ipc_min_bytes:
        if all(t.is_cuda and type(t) in (torch.Tensor, torch.nn.Parameter) for t in tensors):
            try:
                return {"kind": IPC, "tensors": [_describe(t) for t in tensors]}
            except Exception:  # noqa: BLE001 - any IPC trouble: fall back to the file
                pass
    harness.save_outputs(tensors, path)
    return {"kind": FILE, "path": str(path)}


def _describe(t: torch.Tensor) -> dict:
    meta = t.untyped_storage()._share_cuda_()
    return {
        "meta": [m.hex() if isinstance(m, bytes) else m for m in meta],
        "dtype": dtype_name(t.dtype),
        "shape": list(t.shape),
        "stride": list(t.stride()),
        "offset": t.storage_offset(),
    }


def import_outputs(handover: dict, device: torch.device) -> list[torch.Tensor]:
    """The candidate's outputs as tensors on `device`; ValueError when the description is malformed."""
    kind = handover.get("kind")
    if kind == FILE:
        return harness.load_outputs(Path(handover["path"]), device)
    if kind != IPC:
        raise ValueError(f"unknown hand-over kind {kind!r}")
    return [_open(item) for item in handover["tensors"]]


def _open(item: dict) -> torch.Tensor:
    raw = item["meta"]
    if not isinstance(raw, list) or len(raw) != len(_IPC_FIELDS):
        raise ValueError("malformed IPC handle")
    meta = []
    for value, kind in zip(raw, _IPC_FIELDS):
        if kind == "bytes":
            meta.append(bytes.fromhex(value))
        elif kind == "bool":
            meta.append(bool(value))
        else:
            if not isinstance(value, int) or value < 0:
                raise ValueError("malformed IPC handle")
            meta.append(value)
    dtype = getattr(torch, str(item["dtype"]), None)
    if not isinstance(dtype, torch.dtype):
        raise ValueError(f"unknown dtype {item['dtype']!r}")
    shape, stride, offset = [int(v) for v in item["shape"]], [int(v) for v in item["stride"]], int(item["offset"])
    if len(shape) != len(stride) or any(v < 0 for v in shape + stride) or offset < 0:
        raise ValueError("malformed tensor layout")
    element = torch.empty(0, dtype=dtype).element_size()
    extent = offset + (1 + sum((n - 1) * s for n, s in zip(shape, stride)) if all(shape) else 0)
    if extent * element > meta[2]:
        raise ValueError("tensor layout reaches past its shared storage")
    storage = torch.UntypedStorage._new_shared_cuda(*meta)
    return torch.empty(0, dtype=dtype, device=torch.device("cuda", torch.cuda.current_device())).set_(
        storage, offset, shape, stride
    )
