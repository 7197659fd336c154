"""How much device memory a reference needs, found without allocating it.

A validation or an Inductor compilation runs a reference the lane has never seen, so the lane used to
hold half its GPU memory budget for each (two at a time: the pace of a data build's validations). The
reference is first run on PyTorch's `meta` device instead, where tensors have shapes and dtypes but no
storage: every tensor it creates (constructor arguments, parameters, inputs, intermediates and outputs) is
added up. Views are not counted, frees are not subtracted, so the sum bounds the peak from above. Anything
that does not work on `meta` (a data-dependent shape, `.item()`, an explicit device, an op without a meta
kernel) gives no estimate, and the lane falls back to half its budget. An op that would touch a real device
is stopped before it runs; only `torch.tensor(data, device=...)` copies its (host-sized) data before any op
is seen. Run it on a copy of the reference module that the real run does not use: module-level caches may
keep meta tensors.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

from sandbox_service.worker.protocol import Receiver

# The validator holds a reference twice (two builds, two runs for the determinism check).
COPIES = 2


class _NotMeta(Exception):
    """The reference reached for a real device while being estimated."""


class _CountCreated(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.created_bytes = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        device = kwargs.get("device")
        if device is not None and torch.device(device).type != "meta":
            raise _NotMeta(f"{func} on {device}")
        if any(isinstance(t, torch.Tensor) and t.device.type != "meta" for t in tree_leaves((args, kwargs))):
            raise _NotMeta(f"{func} on a real tensor")
        out = func(*args, **kwargs)
        for t in tree_leaves(out):
            if isinstance(t, torch.Tensor) and not t._is_view():
                self.created_bytes += t.numel() * t.element_size()
        return out


def estimate_bytes(module) -> int | None:
    """Bytes that building `module.Model` and running it once on `get_inputs()` create (None: unknown)."""
    counter = _CountCreated()
    try:
        with torch.device("meta"), counter, torch.no_grad():
            model = module.Model(*module.get_init_inputs())
            model(*module.get_inputs())
    except Exception:  # noqa: BLE001 - any failure only means "unknown": the lane reserves half its budget
        return None
    return counter.created_bytes


def ask_for_memory(modules: list, emit: Callable[..., None], control: Receiver) -> bool:
    """Tell the server what the references need (the largest over input sets) and wait for it to hold that
    much; False when the server says anything but `go` (the job is then over)."""
    estimates = [estimate_bytes(module) for module in modules]
    needed = None if any(e is None for e in estimates) else COPIES * max(estimates, default=0)
    emit("estimate", bytes=needed)
    return control.receive().get("type") == "go"
