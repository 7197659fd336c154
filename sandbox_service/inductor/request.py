"""The `Inductor` call on a lane: one reference compiled by TorchInductor in a fresh process of its own.

Whatever goes wrong costs only that process: a hang is `timeout`, a crash or a memory blow-up is
`failed` with its reason, a process that cannot start is `infra_error`. The module that comes back is
text for the caller to verify like any candidate; nothing here runs it.
"""

from __future__ import annotations

import secrets
import threading
import time
from pathlib import Path

from sandbox_service.lane import INDUCTOR, Lane
from sandbox_service.options import InductorOptions
from sandbox_service.results import InductorResult, InductorStatus, truncate
from sandbox_service.worker.conversation import Cancelled, Deadline, MessageStream, hold_memory
from sandbox_service.worker.zygote import ChildStartError


def compile_with_inductor(reference_source: str, options: InductorOptions, lane: Lane,
                          cancel: threading.Event | None = None) -> InductorResult:
    started = time.monotonic()
    result = InductorResult(InductorStatus.INFRA_ERROR, backend=lane.backend)
    try:  # compiling runs the model on the reference's inputs: the process of an unknown reference
        with lane.reference_process(INDUCTOR, [reference_source], options.memory_limit_mb) as (child, paths, hold):
            _converse(child, paths[0], hold, options, lane, cancel, result)
    except ChildStartError as exc:
        result.status, result.reason = InductorStatus.INFRA_ERROR, truncate(str(exc))
    except Cancelled:
        result.status, result.reason = InductorStatus.INFRA_ERROR, "cancelled: the caller went away"
    result.duration_s = round(time.monotonic() - started, 4)
    return result


def _converse(child, reference_path: Path, hold, options: InductorOptions, lane: Lane, cancel,
              result: InductorResult) -> None:
    nonce = secrets.token_hex(16)
    messages = MessageStream(child, nonce)
    child.send({
        "type": "job", "nonce": nonce, "backend": lane.backend, "reference_path": str(reference_path),
        "seed": options.seed, "memory_limit_mb": options.memory_limit_mb,
        "file_limit_mb": 4096, "cpu_limit_s": int(options.timeout_s * 2) + 30,
    })
    deadline = Deadline(lane.freezer, options.timeout_s)
    try:
        message = messages.next(deadline, cancel)
        if message["type"] == "estimate":
            hold_memory(child, hold, message, deadline, cancel)
            message = messages.next(deadline, cancel)
    except TimeoutError:
        result.status, result.reason = InductorStatus.TIMEOUT, f"did not finish within {options.timeout_s:.0f} s"
        return
    kind = message["type"]
    result.device = message.get("device", "")
    result.torch_version = message.get("torch_version", "")
    if kind == "module":
        result.status, result.source = InductorStatus.OK, message["source"]
        result.kernels, result.helpers = int(message["kernels"]), list(message["helpers"])
    elif kind == "refused":
        result.status = InductorStatus.UNAVAILABLE if message.get("unavailable") else InductorStatus.FAILED
        result.reason = truncate(message.get("reason", ""), 1500)
    else:  # exited, garbled, internal_error
        child.kill()
        if child.memory_exceeded:
            reason = f"exceeds the memory limit of {options.memory_limit_mb} MB"
        elif kind == "internal_error":
            reason = "inductor process error: " + truncate(message.get("error", ""), 1500)
        else:
            reason = f"the inductor process {child.describe_exit()}: {child.output()[-1000:]}"
        result.status, result.reason = InductorStatus.FAILED, reason
