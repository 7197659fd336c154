"""A reference validated against itself, in a fresh process of its own (the `Validate` call).

Used to admit generated or user-given tasks: the reference must build, run on several seeds, give finite,
deterministic, non-degenerate outputs that follow its inputs, fit the memory limit and, on the GPU, take at
least `min_ref_time_us` (timed with the GPU to itself, like a candidate). Whatever goes wrong costs only
the validator's process: a hang is `timeout`, a memory blow-up or a crash is `invalid` with its reason.
"""

from __future__ import annotations

import secrets
import threading
import time
from collections.abc import Sequence
from pathlib import Path

from sandbox_service.lane import VALIDATOR, Lane, reference_key
from sandbox_service.options import InputSet, ValidateOptions
from sandbox_service.results import InputSetReport, TimingStats, ValidationResult, ValidationStatus, truncate
from sandbox_service.worker.conversation import Cancelled, Deadline, MessageStream, hold_memory
from sandbox_service.worker.zygote import ChildStartError


def validate(
    reference_source: str,
    input_sets: Sequence[InputSet],
    options: ValidateOptions,
    lane: Lane,
    cancel: threading.Event | None = None,
) -> ValidationResult:
    started = time.monotonic()
    result = ValidationResult(ValidationStatus.INFRA_ERROR, backend=lane.backend)
    try:
        with lane.reference_process(VALIDATOR, reference_source, options.memory_limit_mb) as (child, job_dir, hold):
            _converse(child, job_dir, hold, input_sets, options, lane, cancel, result)
        if result.ok:  # evaluations of this reference need not reserve half the GPU for it
            lane.reference_sizes[reference_key(reference_source, input_sets)] = (
                max(r.input_bytes for r in result.input_sets), max(r.output_bytes for r in result.input_sets))
    except ChildStartError as exc:
        result.status, result.reason = ValidationStatus.INFRA_ERROR, truncate(str(exc))
    except Cancelled:
        result.status, result.reason = ValidationStatus.INFRA_ERROR, "cancelled: the caller went away"
    result.duration_s = round(time.monotonic() - started, 4)
    return result


def _converse(child, job_dir: Path, hold, input_sets, options: ValidateOptions, lane: Lane, cancel, result) -> None:
    nonce = secrets.token_hex(16)
    messages = MessageStream(child, nonce)
    deadline = Deadline(lane.freezer, options.timeout_s)
    timed = options.time and lane.backend == "cuda"
    child.send({
        "type": "job", "nonce": nonce, "backend": lane.backend, "reference_path": str(job_dir / "reference.py"),
        "input_sets": [s.to_dict() for s in input_sets], "seed": options.seed, "seeds": options.seeds,
        "tolerances": {k: list(v) for k, v in options.tolerances.items()}, "time": timed,
        "warmup_runs": options.warmup_runs, "timing_runs": options.timing_runs,
        "memory_limit_mb": options.memory_limit_mb, "file_limit_mb": 65536, "cpu_limit_s": int(options.timeout_s * 2) + 30,
    })
    while True:
        try:
            message = messages.next(deadline, cancel)
        except TimeoutError:
            result.status, result.reason = ValidationStatus.TIMEOUT, f"did not finish within {options.timeout_s:.0f} s"
            return
        kind = message["type"]
        if kind == "estimate":
            hold_memory(child, hold, message, deadline, cancel)
        elif kind == "set_report":
            result.input_sets.append(InputSetReport(name=message["name"], **message["report"]))
        elif kind == "load_error":
            result.status, result.reason = ValidationStatus.INVALID, "does not load: " + truncate(message["error"], 1500)
            return
        elif kind == "ready_to_time":
            with lane.gate.exclusive(), lane.freezer.others_frozen(keep=child):
                child.send({"type": "time"})
                answer = messages.next(deadline, cancel)
            if answer["type"] == "timing":
                result.ref_timing = TimingStats(**answer["stats"])
                result.input_sets[0].ref_time_us = result.ref_timing.median_us
            elif answer["type"] == "timing_error":
                result.status, result.reason = ValidationStatus.INVALID, "fails when timed: " + truncate(answer["error"], 1500)
                return
        elif kind == "done":
            result.device = message.get("device", "")
            _conclude(result, options, timed)
            return
        elif kind in ("exited", "garbled", "internal_error"):
            child.kill()
            if child.memory_exceeded:
                reason = f"exceeds the memory limit of {options.memory_limit_mb} MB"
            else:
                reason = f"the validator process {child.describe_exit()}: {child.output()[-1000:]}"
                if kind == "internal_error":
                    reason = "validator error: " + truncate(message.get("error", ""), 1500)
            result.status, result.reason = ValidationStatus.INVALID, reason
            return


def _conclude(result: ValidationResult, options: ValidateOptions, timed: bool) -> None:
    failed = next((r for r in result.input_sets if not r.ok), None)
    if failed is not None:
        result.status, result.reason = ValidationStatus.INVALID, f"input set {failed.name}: {failed.reason}"
    elif timed and result.ref_timing is None:
        result.status, result.reason = ValidationStatus.INVALID, "was not timed"
    elif timed and result.ref_timing.median_us < options.min_ref_time_us:
        result.status = ValidationStatus.INVALID
        result.reason = (f"reference time {result.ref_timing.median_us:.1f} us is below the "
                         f"{options.min_ref_time_us:.0f} us floor")
    else:
        result.status = ValidationStatus.OK
