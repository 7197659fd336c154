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
from sandbox_service.worker import harness, messages, untrusted_files

FILE = messages.FILE
IPC = messages.IPC


def total_bytes(tensors: list[torch.Tensor]) -> int:
    return sum(t.numel() * t.element_size() for t in tensors)


def export_outputs(tensors: list[torch.Tensor], path: Path, ipc_min_bytes: int | None) -> dict:
    """A description of where the outputs are; IPC when asked for, possible and worth it, else a file."""
    if ipc_min_bytes is not None and tensors and total_bytes(tensors) >= ipc_min_bytes:
        # (an empty tensor has no storage to share: its outputs go by file)
        if all(t.is_cuda and type(t) in (torch.Tensor, torch.nn.Parameter) and t.numel() for t in tensors):
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


class Unmapped(Exception):
    """A well-formed IPC hand-over whose memory could not be mapped here (CUDA IPC unavailable)."""


class Unreadable(Exception):
    """Outputs that are well described but cannot be compared (e.g. far larger than expected)."""


def import_outputs(handover: dict, device: torch.device, *, outputs_dir: str, set_index: int, trial: int,
                   ipc_min_bytes: int | None, max_file_bytes: int) -> list[torch.Tensor]:
    """The candidate's outputs as tensors on `device`, from a hand-over checked again here (defence in depth).

    messages.Malformed: the hand-over or the file breaks the protocol (the candidate's doing: cheat);
    Unmapped: IPC handles that are well-formed but could not be mapped; Unreadable: a file too large."""
    messages.check_handover(handover, outputs_dir=outputs_dir, set_index=set_index, trial=trial,
                            ipc_min_bytes=ipc_min_bytes)
    if handover["kind"] == FILE:
        return _load_file(outputs_dir, messages.output_name(set_index, trial), device, max_file_bytes)
    if device.type != "cuda":
        raise Unmapped("CUDA IPC needs a CUDA device")
    opened = []
    for item in handover["tensors"]:
        try:
            opened.append(_open(item))
        except messages.Malformed:
            raise
        except Exception as exc:  # noqa: BLE001 - the driver refused the handles: not mapped
            raise Unmapped(f"{type(exc).__name__}: {exc}") from None
    return opened


def _load_file(outputs_dir: str, name: str, device: torch.device, max_bytes: int) -> list[torch.Tensor]:
    from safetensors.torch import load

    try:
        data = untrusted_files.read_beneath(outputs_dir, name, max_bytes)
    except untrusted_files.NotARegularFile as exc:
        raise messages.Malformed(messages.HANDOVER_RULE, f"outputs file {exc}") from None
    except untrusted_files.TooLarge as exc:
        raise Unreadable(f"an outputs file too large, far more than the reference's outputs ({exc})") from None
    try:
        loaded = load(data)
    except Exception as exc:  # noqa: BLE001 - whatever safetensors refuses
        raise messages.Malformed(messages.HANDOVER_RULE, f"outputs file {name} is not a safetensors file of "
                                 f"tensors: {type(exc).__name__}: {str(exc)[:200]}") from None
    del data
    if sorted(loaded) != sorted(str(i) for i in range(len(loaded))) or len(loaded) > messages.MAX_TENSORS:
        raise messages.Malformed(messages.HANDOVER_RULE, f"outputs file {name} holds tensors named "
                                 f"{sorted(loaded)[:8]}, not 0..n-1")
    return [loaded[str(i)].to(device) for i in range(len(loaded))]


def _address_range(pointer: int) -> tuple[int, int] | None:
    """The base and size of the device allocation holding `pointer` (cuMemGetAddressRange), or None."""
    import ctypes

    global _LIBCUDA
    if _LIBCUDA is None:
        _LIBCUDA = ctypes.CDLL("libcuda.so.1")
    base, size = ctypes.c_uint64(), ctypes.c_size_t()
    if _LIBCUDA.cuMemGetAddressRange_v2(ctypes.byref(base), ctypes.byref(size), ctypes.c_uint64(pointer)) != 0:
        return None
    return base.value, size.value


_LIBCUDA = None


def _check_mapped(pointer: int, offset_bytes: int, size_bytes: int) -> None:
    """The storage the candidate described lies inside the allocation its handle mapped here.

    torch trusts the storage size and offset that come with a handle: a size larger than the exporter's
    allocation had the judge read past the mapping (an illegal address, which kills its CUDA context), and
    an offset past it could point into the judge's own memory. The mapping starts `offset_bytes` before the
    storage and must hold all of it."""
    found = _address_range(pointer - offset_bytes)
    if found is None:
        raise messages.Malformed(messages.HANDOVER_RULE, "the IPC storage is not in any mapped allocation")
    base, size = found
    if base != pointer - offset_bytes or offset_bytes + size_bytes > size:
        raise messages.Malformed(messages.HANDOVER_RULE, f"an IPC storage of {size_bytes} bytes at offset "
                                 f"{offset_bytes} reaches past the {size} bytes its handle shares")


def _open(item: dict) -> torch.Tensor:
    """A tensor on the shared storage an IPC item describes (already checked by messages.check_ipc_tensor)."""
    raw = item["meta"]
    meta = []
    for value, kind in zip(raw, messages.IPC_FIELDS):
        if kind == "bytes":
            meta.append(bytes.fromhex(value))
        else:
            meta.append(value)
    dtype = getattr(torch, item["dtype"], None)
    if not isinstance(dtype, torch.dtype):
        raise ValueError(f"unknown dtype {item['dtype']!r}")
    storage = torch.UntypedStorage._new_shared_cuda(*meta)
    _check_mapped(storage.data_ptr(), meta[3], meta[2])
    return torch.empty(0, dtype=dtype, device=torch.device("cuda", torch.cuda.current_device())).set_(
        storage, item["offset"], item["shape"], item["stride"]
    )
