"""Helpers shared by the child processes: loading modules, seeding, inputs, outputs, fingerprints.

Runs only inside children (imports torch). Reference and candidate are built after the same seed, and
every trial's inputs come from the reference's `get_inputs()` under that trial's seed, so the reference child
and the candidate child produce identical inputs independently (checked by fingerprint).
"""

from __future__ import annotations

import hashlib
import importlib.util
import random
import sys
import traceback
from pathlib import Path
from typing import Any

import torch

from sandbox_service.results import truncate


def enable_interpreter_autotune() -> None:
    """Let @triton.autotune run under TRITON_INTERPRET=1, where there is no GPU to benchmark on.

    Triton asks the (absent) GPU driver for a benchmarker and fails; timings mean nothing on the
    interpreter anyway, so every config scores the same and the autotuner keeps the first one.
    """
    from triton.runtime.autotuner import Autotuner

    Autotuner.do_bench = property(lambda self: lambda kernel_call, quantiles: [1.0 for _ in quantiles])


def warm_up(backend: str) -> None:
    """Pay the first-use costs of a fresh process before its job arrives (it then sits waiting).

    Measured on an H100 these are seconds per process: torch._dynamo's import (the runtime monitor needs
    it), Triton's hash of its own sources (part of every kernel's cache key), the CUDA driver, and the
    cuBLAS/cuDNN handles the reference model's first matmul or convolution would create. Each step only
    saves time later, so one that fails (another Triton version, say) is reported and skipped.
    """
    import torch._dynamo  # noqa: F401

    if backend != "cuda":
        enable_interpreter_autotune()
        return

    def triton_setup() -> None:
        import triton
        from triton.runtime.cache import triton_key

        triton_key()
        triton.runtime.driver.active.get_current_target()

    def library_handles() -> None:
        x = torch.randn(64, 64, device="cuda")
        (x @ x).sum().item()
        torch.nn.functional.conv2d(x.view(1, 1, 64, 64), x[:3, :3].reshape(1, 1, 3, 3)).sum().item()
        torch.cuda.synchronize()

    for step in (triton_setup, library_handles):
        try:
            step()
        except Exception as exc:  # noqa: BLE001 - an optimisation must never stop the child
            print(f"warm-up step {step.__name__} skipped: {type(exc).__name__}: {exc}", file=sys.stderr)


def device_for(backend: str) -> torch.device:
    return torch.device("cuda:0" if backend == "cuda" else "cpu")


def device_name(backend: str) -> str:
    if backend == "cuda":
        return torch.cuda.get_device_name(0)
    return "cpu (triton interpreter)"


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def load_module(path: str | Path, name: str):
    """Import a source file as a module (Triton needs @triton.jit functions to live in a real file)."""
    spec = importlib.util.spec_from_file_location(name, str(path))
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def seed_everything(seed: int) -> None:
    random.seed(seed)
    torch.manual_seed(seed)
    try:
        import numpy as np

        np.random.seed(seed % (2**32))
    except ImportError:
        pass


def trial_seeds(seed: int, trials: int) -> list[int]:
    """Distinct, reproducible per-trial seeds derived from the evaluation seed."""
    rng = random.Random(seed)
    return [rng.randrange(1, 2**31 - 1) for _ in range(trials)]


def to_device(value: Any, device: torch.device) -> Any:
    if isinstance(value, torch.Tensor):
        return value.to(device)
    if isinstance(value, (list, tuple)):
        return type(value)(to_device(v, device) for v in value)
    return value


def clone(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return value.clone()
    if isinstance(value, (list, tuple)):
        return type(value)(clone(v) for v in value)
    return value


def init_inputs(reference, seed: int, device: torch.device) -> list:
    """Constructor arguments, under the evaluation seed."""
    seed_everything(seed)
    with torch.device(device):
        return to_device(list(reference.get_init_inputs()), device)


def trial_inputs(reference, trial_seed: int, device: torch.device) -> list:
    """One trial's forward inputs under its own seed, created on `device` directly (fast, no host copy)."""
    seed_everything(trial_seed)
    with torch.device(device):
        return to_device(list(reference.get_inputs()), device)


def build_model(module, class_name: str, init_inputs: list, seed: int, device: torch.device) -> torch.nn.Module:
    seed_everything(seed)
    model = getattr(module, class_name)(*init_inputs)
    return model.to(device)


def flatten_outputs(value: Any) -> list[torch.Tensor]:
    """Forward outputs as a flat list of tensors (numbers become 0-d tensors); anything else is an error."""
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (list, tuple)):
        return [t for v in value for t in flatten_outputs(v)]
    if isinstance(value, (bool, int, float)):
        return [torch.tensor(value)]
    raise TypeError(f"forward returned a {type(value).__name__}; expected tensors")


POISON_MIN_BYTES = 64 * 1024 * 1024


def poison_free_memory(device: torch.device, inputs: list) -> None:
    """Fill memory the caching allocator will hand out next with NaN, then release it.

    An output buffer from `torch.empty` that no kernel writes then holds NaN (which never passes),
    not whatever an earlier computation left there.
    """
    if device.type != "cuda":
        return  # the CPU allocator returns large blocks to the OS; fresh pages read as zeros
    size = max(POISON_MIN_BYTES, 2 * sum(t.numel() * t.element_size() for t in inputs if isinstance(t, torch.Tensor)))
    poison = torch.full((size // 4,), float("nan"), dtype=torch.float32, device=device)
    del poison


def fingerprint(groups: list[list]) -> str:
    """A hash of every tensor's dtype, shape and a strided sample of its values (other values by repr)."""
    digest = hashlib.blake2b(digest_size=16)
    for group in groups:
        for value in group:
            if isinstance(value, torch.Tensor):
                digest.update(f"{value.dtype}{tuple(value.shape)}".encode())
                flat = value.detach().reshape(-1)
                step = max(1, flat.numel() // 65536)
                sample = flat[::step]
                sample = sample.to(torch.float64) if not sample.is_complex() else torch.view_as_real(sample)
                digest.update(sample.cpu().numpy().tobytes())
            else:
                digest.update(repr(value).encode())
    return digest.hexdigest()


def outputs_path(outputs_dir: str | Path, trial: int) -> Path:
    return Path(outputs_dir) / f"trial_{trial}.safetensors"


def save_outputs(tensors: list[torch.Tensor], path: Path) -> None:
    from safetensors.torch import save_file

    def host_copy(t: torch.Tensor) -> torch.Tensor:
        # A device tensor's .to("cpu") is already a fresh copy; a host tensor must be cloned so that no two
        # saved outputs share storage (safetensors refuses that) and the file holds this moment's values.
        t = t.detach()
        return t.contiguous().clone() if t.device.type == "cpu" else t.to("cpu").contiguous()

    save_file({str(i): host_copy(t) for i, t in enumerate(tensors)}, str(path))


def load_outputs(path: Path, device: torch.device) -> list[torch.Tensor]:
    from safetensors.torch import load_file

    loaded = load_file(str(path), device="cpu")
    return [loaded[str(i)].to(device) for i in range(len(loaded))]


def format_exception(exc: BaseException) -> str:
    return truncate("".join(traceback.format_exception(type(exc), exc, exc.__traceback__)))
