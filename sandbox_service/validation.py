"""References validated against themselves (the `Validate` and `ValidateBatch` calls).

Used to admit generated or user-given tasks: the reference must build, run on several seeds, give finite,
deterministic, non-degenerate outputs that follow its inputs, fit the memory limit and, on the GPU, take at
least `min_ref_time_us` (timed with the GPU to itself, like a candidate). `Validate` runs one reference in a
fresh process of its own; `ValidateBatch` runs several one after another in a shared process, so that a
data build pays one process and CUDA context for many references (the pace of its validations on a GPU,
where contexts are made one at a time). Whatever goes wrong costs only the reference that caused it: a
hang is `timeout` and a memory blow-up or a crash is `invalid`, each with its reason, and the references
after it go on in a fresh process.
"""

from __future__ import annotations

import dataclasses
import secrets
import threading
import time
from collections.abc import Sequence

from sandbox_service.lane import VALIDATOR, Lane, reference_key
from sandbox_service.options import InputSet, ValidateOptions
from sandbox_service.results import InputSetReport, TimingStats, ValidationResult, ValidationStatus, truncate
from sandbox_service.worker.conversation import Cancelled, Deadline, MessageStream, hold_memory
from sandbox_service.worker.zygote import ChildStartError

MAX_BATCH = 64
Item = tuple[str, Sequence[InputSet]]


def validate(
    reference_source: str,
    input_sets: Sequence[InputSet],
    options: ValidateOptions,
    lane: Lane,
    cancel: threading.Event | None = None,
) -> ValidationResult:
    return validate_batch([(reference_source, input_sets)], options, lane, cancel)[0]


def validate_batch(items: Sequence[Item], options: ValidateOptions, lane: Lane,
                   cancel: threading.Event | None = None) -> list[ValidationResult]:
    """One result per item, in order; the items share validator processes (see the module docstring)."""
    results: list[ValidationResult | None] = [None] * len(items)
    start = 0
    while start < len(items):
        try:
            with lane.reference_process(VALIDATOR, [source for source, _ in items[start:]],
                                        options.memory_limit_mb) as (child, paths, hold):
                start = _converse(child, paths, hold, items, start, options, lane, cancel, results)
        except ChildStartError as exc:
            _fill(results, start, truncate(str(exc)), lane)
            break
        except Cancelled:
            _fill(results, start, "cancelled: the caller went away", lane)
            break
    for (source, input_sets), result in zip(items, results):
        if result.ok:  # evaluations of this reference need not reserve half the GPU for it
            lane.reference_sizes[reference_key(source, input_sets)] = (
                max(r.input_bytes for r in result.input_sets), max(r.output_bytes for r in result.input_sets))
    return results  # type: ignore[return-value]


def _fill(results: list, start: int, reason: str, lane: Lane) -> None:
    """infra_error, with the reason, for the items from `start` that have no result yet."""
    for index in range(start, len(results)):
        if results[index] is None:
            results[index] = ValidationResult(ValidationStatus.INFRA_ERROR, reason=reason, backend=lane.backend)


def _converse(child, paths, hold, items: Sequence[Item], start: int, options: ValidateOptions, lane: Lane,
              cancel, results: list) -> int:
    """Validate items[start:] in this process; returns the index to go on from (len(items) when done). An item
    whose process dies or hangs gets its result here, and the rest go on in a fresh process."""
    nonce = secrets.token_hex(16)
    messages = MessageStream(child, nonce)
    timed = options.time and lane.backend == "cuda"
    count = len(items) - start
    child.send({
        "type": "job", "nonce": nonce, "backend": lane.backend,
        "items": [{"reference_path": str(path), "input_sets": [s.to_dict() for s in sets]}
                  for path, (_, sets) in zip(paths, items[start:])],
        "seed": options.seed, "seeds": options.seeds,
        "tolerances": {k: list(v) for k, v in options.tolerances.items()}, "time": timed,
        "warmup_runs": options.warmup_runs, "timing_runs": options.timing_runs,
        "memory_limit_mb": options.memory_limit_mb, "file_limit_mb": 65536,
        "cpu_limit_s": (int(options.timeout_s * 2) + 30) * count,
    })
    for index in range(start, len(items)):
        result = ValidationResult(ValidationStatus.INFRA_ERROR, backend=lane.backend)
        item_started = time.monotonic()
        deadline = Deadline(lane.freezer, options.timeout_s, of=child)
        finished = _converse_item(child, messages, hold, options, lane, cancel, deadline, timed, result)
        result.duration_s = round(time.monotonic() - item_started, 4)
        if finished is None:  # the process died before the item began: not its fault, go on in a fresh one
            if index == start:
                result.reason = "the validator process " + child.describe_exit() + " before starting"
                results[index] = result
                return index + 1
            return index
        results[index] = result
        if not finished:
            return index + 1
    return len(items)


def _converse_item(child, messages: MessageStream, hold, options: ValidateOptions, lane: Lane, cancel,
                   deadline: Deadline, timed: bool, result: ValidationResult) -> bool | None:
    """One item's messages, from `begin` to `done`. True when the process can go on with the next item, False
    when it was killed (a hang, a crash, a memory blow-up: the item's result says which), None when it died
    before the item began."""
    progress = _Progress()
    try:
        return _item_messages(child, messages, hold, options, lane, cancel, deadline, timed, result, progress)
    except OSError:  # the process went away while the server waited for memory or the GPU on its behalf
        return _died(child, {"type": "exited"}, options, result, progress.began)


@dataclasses.dataclass
class _Progress:
    began: bool = False  # the process said `begin`: what happens from now on is the item's doing


def _item_messages(child, messages: MessageStream, hold, options: ValidateOptions, lane: Lane, cancel,
                   deadline: Deadline, timed: bool, result: ValidationResult, progress: _Progress) -> bool | None:
    while True:
        try:
            message = messages.next(deadline, cancel)
        except TimeoutError:
            child.kill()
            if not progress.began:  # stuck between references: nobody's fault, the rest go on in a fresh process
                return None
            result.status, result.reason = ValidationStatus.TIMEOUT, f"did not finish within {options.timeout_s:.0f} s"
            return False
        kind = message["type"]
        if kind == "begin":
            progress.began = True
        elif kind == "estimate":
            hold_memory(child, hold, message, deadline, cancel)
        elif kind == "set_report":
            result.input_sets.append(InputSetReport(name=message["name"], **message["report"]))
        elif kind == "load_error":
            result.status, result.reason = ValidationStatus.INVALID, "does not load: " + truncate(message["error"], 1500)
        elif kind == "ready_to_time":
            waiting = time.monotonic()
            with lane.gpu_alone(keep=child):
                deadline.extend(time.monotonic() - waiting)  # waiting for the GPU is not the reference's time
                child.send({"type": "time"})
                try:
                    answer = messages.next(deadline, cancel)
                except TimeoutError:
                    answer = {"type": "timeout"}
            if answer["type"] == "timeout":
                result.status, result.reason = ValidationStatus.TIMEOUT, f"did not finish within {options.timeout_s:.0f} s"
                child.kill()
                return False
            if answer["type"] == "timing":
                result.ref_timing = TimingStats(**answer["stats"])
                result.input_sets[0].ref_time_us = result.ref_timing.median_us
            elif answer["type"] == "timing_error":
                result.status, result.reason = ValidationStatus.INVALID, "fails when timed: " + truncate(answer["error"], 1500)
            else:
                return _died(child, answer, options, result, progress.began)
        elif kind == "done":
            result.device = message.get("device", "")
            if result.status != ValidationStatus.INVALID:
                _conclude(result, options, timed)
            return True
        elif kind in ("exited", "garbled", "internal_error"):
            return _died(child, message, options, result, progress.began)


def _died(child, message: dict, options: ValidateOptions, result: ValidationResult, began: bool) -> bool | None:
    """The process ended (or broke the channel): the item's fault once it began, else None (nobody's)."""
    child.kill()
    if not began:
        return None
    if child.memory_exceeded:
        reason = f"exceeds the memory limit of {options.memory_limit_mb} MB"
    elif message["type"] == "internal_error":
        reason = "validator error: " + truncate(message.get("error", ""), 1500)
    else:
        reason = f"the validator process {child.describe_exit()}: {child.output()[-1000:]}"
    result.status, result.reason = ValidationStatus.INVALID, reason
    return False


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
