"""Zero the GPU memory a job freed before the next job's kernels run on the same executor.

A reused executor's caching allocator hands the next job blocks the last one used, and a kernel can read any
address of its context: without this, a wrong kernel could copy an earlier candidate's outputs (or anything
else it left) out of freed memory. Every block the allocator holds but no tensor uses is zeroed in place;
blocks still in use (the executor's own) are left alone. What lies outside the allocator (shared and local
memory, the driver's own) is not reached here: the trials' seeds new to every evaluation make that useless
for the verdict (evaluation.fresh_trial_seeds), and the executor is replaced after EXECUTOR_JOBS jobs.
"""

from __future__ import annotations

from collections.abc import Iterable

import torch


class _Span:
    """A raw device address range, seen by torch as a byte tensor (the CUDA array interface)."""

    def __init__(self, address: int, size: int):
        self.__cuda_array_interface__ = {"shape": (size,), "typestr": "|u1", "data": (address, False),
                                         "version": 3, "strides": None}


def free_spans(segments: Iterable[dict]) -> list[tuple[int, int]]:
    """(address, bytes) of every block no tensor holds, from `torch.cuda.memory_snapshot()` segments."""
    spans = []
    for segment in segments:
        address = int(segment["address"])
        for block in segment["blocks"]:
            size = int(block["size"])
            if block["state"] != "active_allocated" and size:
                spans.append((int(block.get("address", address)), size))
            address += size
    return spans


def scrub_free_memory(device: torch.device) -> int:
    """Zero every free block of `device`'s caching allocator; returns the bytes zeroed."""
    torch.cuda.synchronize(device)
    segments = [s for s in torch.cuda.memory_snapshot() if s["device"] == device.index]
    spans = free_spans(segments)
    with torch.cuda.device(device):
        for address, size in spans:
            torch.as_tensor(_Span(address, size), device=device).zero_()
    torch.cuda.synchronize(device)
    return sum(size for _, size in spans)
