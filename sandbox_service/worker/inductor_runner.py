"""The Inductor child: compile one reference with TorchInductor and write it out as a standalone module.

A fresh process per reference (a user's reference may raise, hang or blow its memory, and Inductor's own
state must not leak into another job): it loads the reference, compiles it (`inductor.capture`), converts
Inductor's wrapper (`inductor.convert`, without libdevice on the interpreter) and reports: `estimate` (the
memory the reference needs; the server answers "go" once it holds it), then `module` (source, kernels,
helpers) or `refused` (reason, and whether this torch cannot compile at all).
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable
from pathlib import Path

import torch

from sandbox_service.inductor.capture import CaptureError, capture
from sandbox_service.inductor.convert import ConversionError, convert
from sandbox_service.worker import harness, sizing
from sandbox_service.worker.protocol import Receiver

Emit = Callable[..., None]


def run(job: dict, emit: Emit, control: Receiver) -> None:
    device = harness.device_for(job["backend"])
    base = {"device": harness.device_name(job["backend"]), "torch_version": torch.__version__}
    try:
        importlib.import_module("torch._inductor.compile_fx")
    except Exception as exc:  # noqa: BLE001 - a torch without a working Inductor
        emit("refused", unavailable=True, reason=f"Inductor cannot be imported: {exc}"[:1000], **base)
        return
    reference_path = Path(job["reference_path"])
    try:  # the estimate gets a copy of its own: what it leaves in module state stays there
        estimated, module = (harness.load_problem_sets(reference_path, [], int(job["seed"]))[0][1] for _ in range(2))
    except BaseException as exc:  # noqa: BLE001
        emit("refused", unavailable=False, reason="the reference does not load: " + _last_line(exc), **base)
        return
    if not sizing.ask_for_memory([estimated], emit, control):
        return
    del estimated
    try:
        # in its own folder: the only one this (jailed) process may write
        captured = capture(module, device, int(job["seed"]), Path(os.getcwd()) / "inductor-cache")
        converted = convert(reference_path.read_text(), captured, portable=job["backend"] == "interpreter")
    except (CaptureError, ConversionError) as exc:
        emit("refused", unavailable=False, reason=str(exc)[:1500], **base)
        return
    except BaseException as exc:  # noqa: BLE001 - the reference or Inductor raised
        emit("refused", unavailable=False, reason="compiling raised: " + _last_line(exc), **base)
        return
    emit("module", source=converted.source, kernels=converted.kernels, helpers=list(converted.helpers), **base)


def _last_line(exc: BaseException) -> str:
    return harness.format_exception(exc).strip().splitlines()[-1][:1000]
