"""One evaluation, orchestrated from the trusted side: layers, processes, messages, verdict.

    format, static (a screen worker) -> judge: prepare the reference (cached per task)
                                     -> candidate process: inputs fingerprinted, ModelNew, trials under the
                                        runtime monitor, each trial's outputs handed to the judge, which compares
                                     -> timing: the candidate timed with the GPU to itself (every other process of
                                        the lane frozen); the reference's time comes from the judge's cache

Every failure maps to one status. What the candidate causes (crash, hang, memory, garbage on the channel)
is charged to the candidate; only what happens before its code runs, in the judge, or inside the sandbox is
`infra_error`, which trainers mask out instead of scoring; its message says which.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import logging
import os
import secrets
import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from sandbox_service.devices import DeviceMemory
from sandbox_service.interface.program import check_program
from sandbox_service.jail import DENIED_SYSCALL_SIGNAL, JAIL_RULES
from sandbox_service.lane import EXECUTOR_JOBS, Lane, reference_key
from sandbox_service.options import EvalOptions, InputSet
from sandbox_service.results import EvalResult, LayerResult, Outcome, Status, TimingStats, Violation, truncate
from sandbox_service.verifier.llm_judge import Judge, JudgeVerdict
from sandbox_service.verifier.runtime import RUNTIME_RULES
from sandbox_service.verifier.screen_pool import ScreenFailure, ScreenPool
from sandbox_service.worker import messages as schema
from sandbox_service.worker import harness, protocol, untrusted_files
from sandbox_service.worker.conversation import STREAM_EVENTS, Cancelled, Deadline, MessageStream
from sandbox_service.worker.cpu_trace import CpuTrace
from sandbox_service.worker.pool import MemoryShort, gigabytes
from sandbox_service.worker.process import Child, remove_tree
from sandbox_service.worker.service import ServiceFailure
from sandbox_service.worker.zygote import ChildStartError

log = logging.getLogger(__name__)

COMPARE_TIMEOUT_S = 120.0
REFERENCE_TIMING_TIMEOUT_S = 600.0
# Between tries of a judge, or an executor, out of GPU memory because other processes held it (load, not a
# verdict); each try also waits for the memory first (lane.free_memory).
MEMORY_WAITS_S = (2.0, 5.0, 10.0, 20.0)
# An executor's allocations are capped at this many times its evaluation's share (the task's estimate, with which
# it was admitted): a program holding far beyond its share is refused in its own executor, its own out-of-memory,
# instead of starving the lane's other evaluations (red team 10); twice, because the estimate was sized on the
# in-process design's candidates and no GPU has run an honest full-size kernel under a tighter cap yet.
EXECUTOR_MEMORY_FACTOR = 2
MAX_BUILDS = 64  # trusted launcher builds (and cubins) per evaluation; beyond, a runtime error
# A candidate's frames: the largest it sends honestly is a build request (C source of at most 1 MB).
CANDIDATE_FRAME_BYTES = 4 << 20
OUTPUT_WAIT_S = 1.0  # for the rest of a failed candidate's output, once it is killed
# Where the candidate's process leaves its launch program (sandbox_service/untrusted/candidate.py).
PROGRAM_FILE, CONSTANTS_FILE = "program.json", "constants.safetensors"
MAX_PROGRAM_BYTES = 4 << 20  # the job message that carries it to the executor must stay within a frame (8 MB)
_TRACER_MESSAGES = frozenset({"program", "unsupported", "rejected", "compile_error", "runtime_error",
                              "internal_error", "jail_violation"})
# The candidate's time is the executor's (CUDA events, in a context the candidate's kernels run in), but never
# less than this share of what the server's own clock saw per run around the same timed batch.
OUTSIDE_FLOOR = 0.5
# Timed batches at most per evaluation: a second one only when the server's clock made the floor bind.
TIMING_ATTEMPTS = 2
# Empty batches measured for a task's floor (the quickest is kept).
EMPTY_BATCHES = 2
# The kept empty batch is the quickest ever measured for its key, and measured again (once more) by an
# evaluation whose first batch the floor did not trust (it bound, or the batch read no longer than the empty one), and
# by a secret share of the others: GPU work that frozen processes queued before the hold keeps running through it
# (freezing stops launches, not kernels), so one measurement can read long, and it set the floor of every later
# evaluation of the task (red team 11).
EMPTY_BATCH_REFRESH = 0.1
# The reference's figure is the lane's, one per task and protocol, whichever judge timed it (each judge of a task
# kept its own: on an H100 one task's RL-sized reference read 30 us from one judge and 52 us from the other, so
# the same candidate's speedup depended on the judge it met). It is the quickest measured, and a secret share of
# timed evaluations measures it once more: timing noise only adds time, and a figure read long (queued GPU work
# of frozen processes running through the hold) would inflate every later speedup of the task.
REFERENCE_REFRESH = 0.1
# Measurements of a protocol's first figure, the quicker kept (as the empty batch's, EMPTY_BATCHES): queued GPU work
# of frozen processes runs through the first and inflated every later speedup of the task until a refresh replaced
# it, about ten timed evaluations (red team 13's open item).
REFERENCE_FIRST_TIMINGS = 2
# The judge checks timed runs' outputs (inputs it knows): each run is checked on its own, with probability
# EXPECTED_TIMING_CHECKS / runs, in secret. A kernel that skips a share s of the runs passes with probability
# about exp(-EXPECTED_TIMING_CHECKS * s) (half the runs: 1 in 12; all: 1 in 150), and seeing which runs were
# checked (a longer gap after them) tells it nothing of the runs to come. At most MAX_TIMING_CHECKS a batch.
EXPECTED_TIMING_CHECKS = 5
MAX_TIMING_CHECKS = schema.MAX_TIMING_CHECKS
EXECUTOR_TIMING_METHOD = "cuda_events"  # timing.CUDA_EVENTS: the executor's protocol (executor/runner.py)
# A GPU spin between each timed run's synchronisation and its start event (timing.time_cuda's lead_us), for the
# executor's candidate and the judge's reference alike; unset: KernelBench's synchronised runs.
TIMING_LEAD_ENV = "TRITONRL_TIMING_LEAD_US"


def timing_lead_us() -> float | None:
    return float(os.environ.get(TIMING_LEAD_ENV) or 0) or None


@dataclasses.dataclass(frozen=True)
class _TimedAttempt:
    """One timed batch: the executor's figure, the reference's, and what the server's clock saw per run."""

    candidate: TimingStats
    reference: TimingStats
    batch_s: float  # the timed batch on the server's clock
    empty_s: float  # the empty batch subtracted from it
    calls: int

    @property
    def outside_us(self) -> float:
        return max(0.0, self.batch_s - self.empty_s) / max(1, self.calls) * 1e6

    @property
    def floor_binds(self) -> bool:
        return self.candidate.median_us < OUTSIDE_FLOOR * self.outside_us

    @property
    def trusted(self) -> bool:
        """Whether the floor may stand on this batch alone: it did not bind, and the server's clock saw the batch
        longer than the empty batch (a timed batch is an empty one plus the candidate's work: one no longer than
        it says the empty batch read long)."""
        return not self.floor_binds and self.batch_s > self.empty_s

    def against(self, empty_s: float) -> "_TimedAttempt":
        return dataclasses.replace(self, empty_s=empty_s)

    def describe(self) -> str:
        return f"{self.candidate.method}; the server's clock saw {self.outside_us:.1f} us per run"


def fresh_trial_seeds(sets: int, trials: int) -> list[list[int]]:
    """Every trial's seed, per input set, new to one evaluation."""
    chooser = secrets.SystemRandom()
    return [[chooser.randrange(1, 2**31 - 1) for _ in range(trials)] for _ in range(sets)]


def timing_order(runs: int, expected_checks: float) -> dict:
    """A timing's secrets, new to each one: the seed of its runs' inputs, which runs the judge checks (each one
    on its own, `expected_checks` of them on average; in the order they run) and their seeds. Nothing in them
    repeats between evaluations, so no memory of an earlier one finds a check; and as each run is drawn alone,
    the checks a kernel has seen pass say nothing of those to come (with a fixed number, the last one seen
    would free every later run: red team 4). Beyond MAX_TIMING_CHECKS (once in about 10^6 batches of 100
    runs), a random MAX_TIMING_CHECKS of them are kept."""
    chooser = secrets.SystemRandom()
    rate = min(1.0, expected_checks / max(1, runs))
    checked = [run for run in range(runs) if chooser.random() < rate]
    if len(checked) > MAX_TIMING_CHECKS:
        checked = sorted(chooser.sample(checked, MAX_TIMING_CHECKS))
    return {"type": "time", "run_seed": chooser.randrange(1, 2**31 - 1), "checked_runs": checked,
            "check_seeds": [chooser.randrange(1, 2**31 - 1) for _ in checked],
            "sample_seed": chooser.randrange(1, 2**63)}
STOP_WAIT_S = 5.0  # for a released executor's last message


def _out_of_memory(answer: dict) -> bool:
    return answer.get("type") == "error" and answer.get("kind") == "memory"


def out_of_memory_is_load(held: int, requested: int | None, share: int, device: DeviceMemory | None) -> bool:
    """Whether an executor that ran out of GPU memory was short because other processes held the memory (load:
    tried again) rather than because the candidate asked for more than it may (its verdict).

    The evaluation was admitted with its share: the task's estimate (lane.estimate_bytes: the inputs, outputs
    and temporaries the problem needs, and a context's worth more), free on the device when it started. The
    evaluation asked for what its executor held at most plus the allocation it was refused; when torch does not
    say what was refused (the driver's own out-of-memory), at least more than the device had free (`device`,
    read by the server just after the failure). Within the share, and within what the device has at all, the
    device was short; beyond either, the candidate asked for it itself (a huge output, an allocation for every
    launch). Not knowing either figure, it is the candidate's, as every out-of-memory was before."""
    if requested is None:
        if device is None:
            return False
        requested = device.free + 1
    limit = share if device is None else min(share, device.total)
    return held + requested <= limit


class _LoadShortage(Exception):
    """The executor ran out of GPU memory within its evaluation's share: the evaluation is tried again."""


class _Finish(Exception):
    """Ends the evaluation with a final status."""

    def __init__(self, status: Status, error: str = ""):
        super().__init__(error)
        self.status = status
        self.error = error


def _layer(result: EvalResult, name: str, outcome: Outcome, started: float, detail: str = "") -> None:
    result.layers.append(LayerResult(name, outcome, round(time.monotonic() - started, 6), truncate(detail, 500)))


@dataclasses.dataclass(frozen=True)
class ProblemRef:
    """What the judge needs to know a task by: its sources and the trial protocol."""

    key: str
    reference: str  # lane.reference_key: the reference and its input sets alone
    reference_source: str  # sent to the judge itself: never a path into a folder a candidate might write
    input_sets: tuple[dict, ...]
    seed: int
    trials: int
    tolerances: dict
    degenerate_rel_l2: float
    trial_key: str  # the lane's secret: trial seeds no candidate can work out (harness.trial_seeds)

    @classmethod
    def create(cls, reference_source: str, input_sets: Sequence[InputSet], options: EvalOptions,
               trial_key: str = "") -> ProblemRef:
        sets = tuple(s.to_dict() for s in input_sets)
        tolerances = {k: list(v) for k, v in options.tolerances.items()}
        trials = options.trials
        identity = json.dumps([reference_source, sets, options.seed, trials, tolerances,
                               options.degenerate_rel_l2, bool(trial_key)], sort_keys=True)
        key = hashlib.sha256(identity.encode()).hexdigest()
        return cls(key, reference_key(reference_source, input_sets), reference_source, sets, options.seed,
                   trials, tolerances, options.degenerate_rel_l2, trial_key)

    def prepare_request(self) -> dict:
        return {"op": "prepare", "key": self.key, "reference_source": self.reference_source,
                "input_sets": list(self.input_sets),
                "seed": self.seed, "trials": self.trials, "tolerances": self.tolerances,
                "degenerate_rel_l2": self.degenerate_rel_l2, "trial_key": self.trial_key}


class JudgeLink:
    """This evaluation's conversation with the judge that keeps its task: GPU work when no timing holds the gate,
    and a judge restarted by someone else's failure is re-prepared (and must agree with what it said before)."""

    def __init__(self, lane: Lane, problem: ProblemRef, options: EvalOptions, cancel: threading.Event | None = None):
        self.lane = lane
        self.problem = problem
        self.options = options
        self.cancel = cancel or threading.Event()  # ends a wait for memory when the caller goes away
        self.service = lane.judge_for(problem.key)
        self.prepared: dict | None = None
        self.wall_s = 0.0  # time in judge calls, queueing included
        self.service_s = 0.0  # of which the judge itself worked
        self.memory_s = 0.0  # waiting for GPU memory after the judge ran out of it
        self.memory_notes: list[str] = []

    def _call(self, message: dict, timeout_s: float, gated: bool = True) -> dict:
        started = time.monotonic()
        try:
            if gated:
                with self.lane.gate.turn(self.service.lock):
                    answer = self.service.request(message, timeout_s)
            else:  # the caller holds the GPU and this judge (Lane.gpu_alone)
                answer = self.service.request(message, timeout_s)
        finally:
            self.wall_s += time.monotonic() - started
        self.service_s += float(answer.get("duration_s", 0.0))
        return answer

    def prepare(self, reserve: bool = True) -> dict:
        """The judge prepares the task. `reserve`: hold GPU memory for it meanwhile; False when the caller
        already holds the evaluation's reservation (nested reservations could wait on each other forever).

        A judge out of GPU memory is load, not a verdict (other processes on the GPU, a trainer or other
        evaluations, may hold it for a while): the preparation waits and is tried again, MEMORY_WAITS_S apart."""
        answer = self._waiting_for_memory(lambda: self._prepare_once(reserve), "preparing")
        if answer.get("type") == "error":
            raise _error_finish(answer)
        if self.prepared is not None and (
            answer["input_fingerprints"] != self.prepared["input_fingerprints"]
            or answer["output_fingerprints"] != self.prepared["output_fingerprints"]
        ):
            raise _Finish(Status.REFERENCE_ERROR, "the reference is not deterministic: a restarted judge computed "
                                                  "other inputs or outputs for the same seeds")
        self.prepared = answer
        self.lane.problem_sizes[self.problem.key] = (int(answer["input_bytes"]), int(answer["output_bytes"]))
        return answer

    def _waiting_for_memory(self, call, what: str) -> dict:
        """`call()`'s answer, called again MEMORY_WAITS_S apart while the judge is out of GPU memory, each time
        once the GPU has what the judge was refused free (when it says how much)."""
        for wait in MEMORY_WAITS_S:
            answer = call()
            if not _out_of_memory(answer):
                return answer
            log.warning("the judge ran out of GPU memory %s %s; trying again in %.0f s", what, self.problem.key, wait)
            if self.cancel.wait(wait):
                raise _Finish(Status.INFRA_ERROR, "cancelled while waiting for GPU memory: the caller went away or "
                                                  "the server is stopping")
            self.memory_s += wait
            self.memory_notes.append(f"the judge out of GPU memory {what} the reference: {self._refused_free(answer)}")
        answer = call()
        if _out_of_memory(answer):
            raise _Finish(Status.INFRA_ERROR, f"the judge was out of GPU memory {what} the reference "
                                              f"{len(MEMORY_WAITS_S) + 1} times over {sum(MEMORY_WAITS_S):.0f} s "
                                              f"(other processes on this GPU hold it): {answer.get('error', '')}")
        return answer

    def _refused_free(self, answer: dict) -> str:
        """Wait until the GPU has the allocation the judge was refused free; what it waited, in words."""
        refused = answer.get("requested")
        if not refused or not self.lane.free_memory.watching:
            return "tried again"
        try:
            wait = self.lane.free_memory.wait_free(int(refused), self.cancel.is_set)
        except MemoryShort as exc:
            raise _Finish(Status.INFRA_ERROR, f"the judge was out of GPU memory, and then {exc}: "
                                              f"{answer.get('error', '')}") from None
        except TimeoutError:
            raise _Finish(Status.INFRA_ERROR, "cancelled while waiting for GPU memory: the caller went away or the "
                                              "server is stopping") from None
        self.memory_s += wait.seconds
        return wait.describe()

    def _prepare_once(self, reserve: bool) -> dict:
        for attempt in range(2):
            try:
                reservation = self.lane.prepare_bytes(self.problem.key, self.problem.reference) if reserve else 0
                with self.lane.memory.reserve(reservation):
                    answer = self._call(self.problem.prepare_request(), self.options.timeout_s)
                break
            except ServiceFailure as exc:
                # A judge killed under us (memory, a signal) while our request was in flight is tried once more;
                # a reference that crashes it twice, or hangs, is the reference's problem.
                if attempt == 0 and not exc.timed_out:
                    continue
                what = f"did not finish within {self.options.timeout_s:g} s" if exc.timed_out else "crashed the judge"
                raise _Finish(Status.REFERENCE_ERROR, f"the reference {what} while being prepared: {exc.cause}") from None
        return answer

    def _compare_request(self, message: dict, outputs_dir: str, ipc_min_bytes: int | None, seed: int | None,
                         sample_seed: int | None) -> dict:
        request = {"op": "compare", "key": self.problem.key, "set": message["set"], "trial": message["trial"],
                   "handover": message["handover"], "outputs_dir": outputs_dir, "ipc_min_bytes": ipc_min_bytes}
        if seed is not None:
            request["seed"] = seed
        if sample_seed is not None:
            request["sample_seed"] = sample_seed
        return request

    def compare(self, message: dict, outputs_dir: str, ipc_min_bytes: int | None, seed: int | None = None,
                sample_seed: int | None = None) -> dict:
        """The judge's reading of a trial's outputs. `message` was checked (messages.Schema); the request is
        built from its fields, with the evaluation's own outputs folder and IPC threshold (the judge checks
        the hand-over against them again). `seed`: the trial's or timing check's, new to this evaluation, whose
        inputs and expected outputs the judge makes now; `sample_seed`: a timing check's, whose outputs are the
        sample it names (harness.sample_indices)."""
        request = self._compare_request(message, outputs_dir, ipc_min_bytes, seed, sample_seed)
        for attempt in range(2):
            try:
                answer = self._waiting_for_memory(lambda: self._call(request, COMPARE_TIMEOUT_S), "comparing with")
            except ServiceFailure as exc:
                if attempt == 0:
                    self.prepare(reserve=False)
                    continue
                if message["handover"].get("kind") == "ipc":
                    raise _Finish(Status.RUNTIME_ERROR, f"the judge failed twice reading this candidate's outputs: {exc}")
                raise _Finish(Status.INFRA_ERROR, f"the judge failed while comparing: {exc}") from None
            if answer.get("type") == "unknown_problem":
                answer = self._prepare_and_compare(request)  # evicted or restarted meanwhile: both in one turn
            if answer.get("type") == "error":
                raise _error_finish(answer, " while comparing")
            if answer.get("type") == "unknown_problem":
                raise _Finish(Status.INFRA_ERROR, "the judge lost this task while comparing")
            return answer
        raise _Finish(Status.INFRA_ERROR, "the judge failed twice while comparing")

    def compare_together(self, items: list[tuple[dict, str, int | None, int | None, int | None]]) -> list[dict | None]:
        """Several comparisons (compare's arguments each) in one turn of the judge: the gate and the judge are
        taken once, not once per item (a pending timing goes first at every turn). An item whose answer is not
        plainly `compared` or `malformed` (the judge failed, lost the task, ran out of memory) is answered None:
        the caller then asks compare(), which handles those, for it alone."""
        requests = [self._compare_request(*item) for item in items]
        answers: list[dict | None] = []
        started = time.monotonic()
        try:
            with self.lane.gate.turn(self.service.lock):
                for request in requests:
                    answer = self.service.request(request, COMPARE_TIMEOUT_S)
                    self.service_s += float(answer.get("duration_s", 0.0))
                    answers.append(answer if answer.get("type") in ("compared", "malformed") else None)
        except ServiceFailure:
            pass  # the rest are asked one by one, where a restarted judge is prepared again
        finally:
            self.wall_s += time.monotonic() - started
        return answers + [None] * (len(items) - len(answers))

    def _prepare_and_compare(self, request: dict) -> dict:
        """Prepare again and compare with the judge held throughout, so that nothing evicts the task between."""
        with self.lane.gate.turn(self.service.lock):
            prepared = self.service.request(self.problem.prepare_request(), self.options.timeout_s)
            if prepared.get("type") != "prepared":
                return prepared
            if (prepared["input_fingerprints"] != self.prepared["input_fingerprints"]
                    or prepared["output_fingerprints"] != self.prepared["output_fingerprints"]):
                raise _Finish(Status.REFERENCE_ERROR, "the reference is not deterministic: a restarted judge "
                                                      "computed other inputs or outputs for the same seeds")
            return self.service.request(request, COMPARE_TIMEOUT_S)

    def _protocol(self, method: str, fresh_inputs: bool) -> tuple:
        lead_us = timing_lead_us() if fresh_inputs else None  # the executor design's protocol
        return self.problem.key, method, self.options.warmup_runs, self.options.timing_runs, fresh_inputs, lead_us

    def reference_due(self, method: str, fresh_inputs: bool = False) -> bool:
        """Whether the next timing measures the reference: the lane has no figure for the protocol yet, or the
        secret REFERENCE_REFRESH draw says so. Decided before the hold, which then waits for the judges' turns in
        flight (Lane.gpu_alone's `drain`): GPU work a frozen judge queued would inflate a figure kept for every
        later candidate of the task (red team 14)."""
        return (self.lane.reference_times.get(self._protocol(method, fresh_inputs)) is None
                or secrets.SystemRandom().random() < REFERENCE_REFRESH)

    def time_reference(self, method: str, fresh_inputs: bool = False, due: bool | None = None) -> TimingStats:
        """The reference's time (the lane's, per task and protocol: REFERENCE_REFRESH), asked with the GPU held;
        `fresh_inputs`: on new inputs for every run, as the executor times candidates (the same inputs every run
        made the reference about 1.2x faster than that protocol would on an H100: benchmarks/replay_overhead.py).
        `due`: reference_due's answer, drawn before the hold (None: drawn now)."""
        protocol = self._protocol(method, fresh_inputs)
        kept = self.lane.reference_times.get(protocol)
        if due is None:
            due = self.reference_due(method, fresh_inputs)
        if kept is not None and not due:
            return kept
        for _ in range(1 if kept is not None else REFERENCE_FIRST_TIMINGS):
            request = {"op": "time", "key": self.problem.key, "method": method, "warmup": self.options.warmup_runs,
                       "runs": self.options.timing_runs, "fresh_inputs": fresh_inputs, "remeasure": kept is not None,
                       "lead_us": protocol[-1]}
            try:
                measured = self._judge_time(request)
            except _Finish as finish:
                # A remeasure the judge could not finish (out of GPU memory that frozen processes hold, a judge that
                # died) is no verdict: the lane's figure stands (red team 13). The reference's own failure still
                # ends it.
                if kept is None or finish.status is not Status.INFRA_ERROR:
                    raise
                log.warning("the reference of %s was not remeasured (%s); the lane's figure stands",
                            self.problem.key, finish.error)
                return kept
            if kept is None or measured.median_us < kept.median_us:
                self.lane.reference_times[protocol] = kept = measured
        return kept

    def _judge_time(self, request: dict) -> TimingStats:
        for _ in range(2):
            try:
                answer = self._call(request, REFERENCE_TIMING_TIMEOUT_S, gated=False)  # the caller holds the GPU
            except ServiceFailure as exc:
                raise _Finish(Status.INFRA_ERROR, f"the judge failed while timing the reference: {exc}") from None
            if answer.get("type") == "unknown_problem":
                self.prepare_ungated()
                continue
            if answer.get("type") == "error":
                raise _error_finish(answer, " while being timed")
            return TimingStats(**answer["stats"])
        raise _Finish(Status.INFRA_ERROR, "the judge lost this task while timing the reference")

    def prepare_ungated(self) -> None:
        answer = self._call(self.problem.prepare_request(), self.options.timeout_s, gated=False)
        if answer.get("type") == "error":
            raise _error_finish(answer)
        if answer.get("type") != "prepared":
            raise _Finish(Status.INFRA_ERROR, f"the judge answered {answer.get('type')!r} to a preparation")


def _error_finish(answer: dict, when: str = "") -> _Finish:
    """The verdict of a judge's error answer: the reference's own failure (it raised, has no get_inputs, made
    non-finite outputs ...) is reference_error, never charged to the candidate; anything else is the sandbox's."""
    if answer.get("kind") == "reference":
        error = str(answer.get("error", ""))
        lines = [line for line in error.splitlines() if line.strip()]
        # The exception's own line first (a one-line message can show it), then the judge's traceback.
        detail = f"{lines[-1].strip()}\n{error}" if len(lines) > 1 else error
        return _Finish(Status.REFERENCE_ERROR, f"the reference failed{when}: {detail}")
    return _Finish(Status.INFRA_ERROR, f"the judge failed{when}: {answer.get('error', '')}")


def evaluate(
    reference_source: str,
    candidate_source: str,
    options: EvalOptions,
    lane: Lane,
    cancel: threading.Event | None = None,
    input_sets: Sequence[InputSet] = (),
) -> EvalResult:
    """All layers: the format and static screens in the lane's screen workers, then the processes (runtime,
    correctness, timing)."""

    def run(result: EvalResult) -> None:
        code = _screen_source(reference_source, candidate_source, options, result, lane.screens)
        if code is None:
            return
        review = _JudgeReview.start(lane.llm_judge, reference_source, code, options) if lane.llm_judge else None
        _Evaluation(reference_source, code, options, lane, cancel, input_sets, result).run()
        if review is not None:
            review.apply(result)

    return _finalized(run, options, lane, input_sets)


def run_isolated(
    reference_source: str, code: str, options: EvalOptions, lane: Lane, cancel: threading.Event | None = None,
    input_sets: Sequence[InputSet] = (),
) -> EvalResult:
    """Only the process part, on code that skipped the source screens.

    For testing the isolation itself: the containment of code that the static layer would have
    rejected (writing to descriptors, crashing the interpreter). The server never calls this.
    """
    return _finalized(
        lambda result: _Evaluation(reference_source, code, options, lane, cancel, input_sets, result).run(),
        options, lane, input_sets,
    )


def evaluate_local(
    reference_source: str, candidate_source: str, options: EvalOptions, backend: str = "auto", judge: Judge | None = None,
    input_sets: Sequence[InputSet] = (),
) -> EvalResult:
    """One evaluation in this process's own lane (first GPU, or the interpreter): no server needed."""
    from sandbox_service.devices import resolve_backend

    info = resolve_backend(backend)
    with tempfile.TemporaryDirectory(prefix="tritonrl-local-") as root:
        gpu = info.gpus[0] if info.gpus else None
        lane = Lane.create(info.backend, gpu, warm=0, work_root=Path(root), llm_judge=judge, judges=1)
        try:
            return evaluate(reference_source, candidate_source, options, lane, input_sets=input_sets)
        finally:
            lane.close()


class _JudgeReview:
    """The LLM judge reads the code while the processes run; its findings join the verdict after.

    A judge that fails or times out is reported in `layers` (outcome error) and changes nothing else:
    the deterministic layers still decide, so a derailed judge can neither fail nor rescue a kernel.
    """

    def __init__(self, judge: Judge, reference_source: str, code: str, options: EvalOptions):
        self.started = time.monotonic()
        self.verdicts: list[JudgeVerdict] = []
        self.thread = threading.Thread(
            target=lambda: self.verdicts.append(judge.review(reference_source, code, options.policy)),
            name="llm-judge",
            daemon=True,
        )
        self.timeout_s = judge.timeout_s + 5.0

    @classmethod
    def start(cls, judge: Judge, reference_source: str, code: str, options: EvalOptions) -> _JudgeReview:
        review = cls(judge, reference_source, code, options)
        review.thread.start()
        return review

    def apply(self, result: EvalResult) -> None:
        self.thread.join(timeout=max(0.0, self.timeout_s - (time.monotonic() - self.started)))
        verdict = self.verdicts[0] if self.verdicts else JudgeVerdict.failed("the judge did not answer in time")
        _layer(result, "judge", verdict.outcome, self.started, verdict.detail)
        if verdict.cheat:
            result.violations += verdict.findings
            if result.status != Status.CHEAT:
                result.status, result.error = Status.CHEAT, truncate("LLM judge: " + verdict.detail)


def _finalized(run, options: EvalOptions, lane: Lane, input_sets: Sequence[InputSet]) -> EvalResult:
    started = time.monotonic()
    result = EvalResult(status=Status.INFRA_ERROR, backend=lane.backend, trials=options.trials * (1 + len(input_sets)))
    try:
        run(result)
    except Cancelled:
        result.status, result.error = Status.INFRA_ERROR, "cancelled: the caller went away or the server is stopping"
    except ChildStartError as exc:
        result.status, result.error = Status.INFRA_ERROR, truncate(str(exc))
    except Exception as exc:  # noqa: BLE001 - a bug in the sandbox must not look like the candidate's fault
        log.exception("evaluation failed inside the sandbox")
        result.status, result.error = Status.INFRA_ERROR, truncate(f"sandbox error: {type(exc).__name__}: {exc}")
    result.valid = result.valid and result.status not in (Status.FORMAT_ERROR, Status.CHEAT)
    result.correct = result.status == Status.OK
    result.duration_s = round(time.monotonic() - started, 4)
    return result


def _screen_source(reference_source: str, candidate_source: str, options: EvalOptions, result: EvalResult,
                   screens: ScreenPool) -> str | None:
    """Format and static layers, on text only, in a screen worker process (the server's threads neither parse
    nor analyse: verifier/screen_pool.py says why). Returns the code to run, or None when rejected."""
    try:
        screened = screens.screen(candidate_source, reference_source, options)
    except ScreenFailure as exc:
        log.error("the source screens failed: %s", exc)
        result.status, result.error = Status.INFRA_ERROR, truncate(f"the source screens failed: {exc}")
        return None
    if screened.format_violations:
        result.violations += screened.format_violations
        _screen_layer(result, "format", Outcome.FAILED, screened.format_s, screened.format_violations[0].message)
        result.status = Status.FORMAT_ERROR
        return None
    _screen_layer(result, "format", Outcome.PASSED, screened.format_s)

    static = screened.static_violations or []
    if static:
        result.violations += static
        _screen_layer(result, "static", Outcome.FAILED, screened.static_s, "; ".join(v.rule for v in static))
        result.status = Status.CHEAT
        return None
    _screen_layer(result, "static", Outcome.PASSED, screened.static_s)
    result.valid = True
    return screened.code


def _screen_layer(result: EvalResult, name: str, outcome: Outcome, duration_s: float, detail: str = "") -> None:
    result.layers.append(LayerResult(name, outcome, round(duration_s, 6), truncate(detail, 500)))


class _Evaluation:
    """The process part of one evaluation: judge, candidate process, message loop, timing."""

    def __init__(self, reference_source: str, code: str, options: EvalOptions, lane: Lane,
                 cancel: threading.Event | None, input_sets: Sequence[InputSet], result: EvalResult):
        self.options = options
        self.lane = lane
        self.cancel = cancel
        self.result = result
        self.sources = {"reference.py": reference_source, "candidate.py": code}
        self.folder = Path()  # the candidate process's own folder, once it has one (_with_candidate)
        self.outputs_dir = ""  # its outputs folder, inside that one (resolved: messages.check_output_path)
        # The executor design has the judge check timed runs' outputs (timing_order), on seeds new to each timing:
        # this many on average, and at most MAX_TIMING_CHECKS a batch.
        timed_by_executor = lane.executor_design and options.time and lane.backend == "cuda"
        self.timing_checks = EXPECTED_TIMING_CHECKS if timed_by_executor else 0
        self.problem = ProblemRef.create(reference_source, input_sets, options, lane.trial_key)
        # This evaluation's IPC threshold (None: files only). A failed IPC hand-over changes it for this
        # evaluation alone; a malformed one is the candidate's cheat. The lane's setting is never changed here.
        self.ipc_min_bytes = lane.ipc_min_bytes
        self.ipc_failed = False
        self.positions = [(s, t) for s in range(1 + len(input_sets)) for t in range(options.trials)]
        # The executor design's trials run on seeds new to this evaluation (the judge makes their expected
        # outputs when it compares): a reused executor may keep what an earlier job's kernels left in memory
        # no scrub reaches, and none of it answers this evaluation's inputs.
        self.trial_seeds = fresh_trial_seeds(1 + len(input_sets), options.trials) if lane.executor_design else None
        self.handed_over = 0  # trials whose outputs the judge compared, in order
        self.resend_due = False  # the judge could not map this trial's IPC handles: its file comes next
        self.builds = {"build_request": 0, "ptxas_request": 0}
        self.judge = JudgeLink(lane, self.problem, options, cancel)
        self.trials: dict[tuple[int, int], dict] = {}
        self.handover_changed: list[tuple[int, int]] = []
        self.seen: dict[str, dict] = {}
        self.child: Child | None = None  # the process of the current phase: the candidate's, then the executor
        self.executor: Child | None = None
        self.messages: MessageStream | None = None  # the executor's stream (its last message is read on release)
        self.cpu: CpuTrace | None = None  # the executor's CPU by stage of this job (the DEBUG log's)
        self.candidate_ran = False  # whether anything of the candidate's has run in `child` (its faults are its own)
        self.acquire_s = 0.0
        self.build_s = 0.0
        self.estimate = 0  # GPU memory the evaluation may hold (lane.estimate_bytes), once the task is prepared
        self.minimum = 0  # ... and needs at least (lane.minimum_bytes)
        # What the GPU had free for this try when it started alone below its estimate (FreeMemory.settle_s), less
        # the margin; None: it was admitted with its estimate free.
        self.started_alone_with: int | None = None
        self.remeasure_empty = False  # the next timed attempt measures the task's empty batch again (_time)
        self.memory_s = 0.0  # waiting for GPU memory: the lane's budget, the device's free memory, retries
        self.memory_notes: list[str] = []
        self.tracer_output: Callable[[float], str] | None = None  # the tracer's output, once an executor took over

    def _record_costs(self) -> None:
        """Where the evaluation waited (layers named after the resource, for benchmarks and debugging)."""
        ready = f"; its process became ready {self.child.ready_after_s:.2f} s after its fork" if self.child else ""
        self.result.layers.append(LayerResult("process", Outcome.PASSED, round(self.acquire_s, 6),
                                              f"waiting for a ready candidate process{ready}"))
        self.result.layers.append(LayerResult("reference_runner", Outcome.PASSED, round(self.judge.wall_s, 6),
                                              f"reference-runner work {self.judge.service_s:.4f} s, the rest queueing"))
        if self.build_s:
            self.result.layers.append(LayerResult("build", Outcome.PASSED, round(self.build_s, 6),
                                                  "waiting for trusted launcher builds"))
        notes = self.judge.memory_notes + self.memory_notes
        if notes:
            waited = self.judge.memory_s + self.memory_s
            self.result.layers.append(LayerResult("memory", Outcome.PASSED, round(waited, 6),
                                                  truncate("; ".join(notes), 500)))

    def run(self) -> None:
        try:
            self._run()
        except _Finish as finish:
            self.result.status = finish.status
            self.result.error = truncate(finish.error)
        finally:
            self._record_costs()
            if self.tracer_output is not None:  # a verdict other than ok waits for the rest of it (it was killed)
                wait_s = 0.0 if self.result.status == Status.OK else OUTPUT_WAIT_S
                self.result.stdout_tail = truncate(self.tracer_output(wait_s), 2000)
            child = self.child
            if child is not None and child is self.executor and self._executor_reusable():
                child.stop_watching()
                remove_tree(self.folder)
                if self._executor_stopped(child):
                    if self.cpu is not None:
                        child.cpu_released = self.cpu.last
                        log.debug("executor %d CPU ms by stage: %s", child.pid, self.cpu.summary())
                    self.lane.executors.release(child)
                else:
                    self.lane.executors.discard(child)
            elif child is not None:
                child.kill(wait=False)
                # A failed evaluation's output is worth the wait (it is killed just now); an ok one does not wait.
                wait_s = 0.0 if self.result.status == Status.OK else OUTPUT_WAIT_S
                if child is not self.executor:
                    self.result.stdout_tail = truncate(child.output(wait_s), 2000)
                if child is self.executor:
                    self.lane.executors.discard(child)
                else:
                    child.close(wait=False)
            if self.messages is not None:
                self.messages.close()

    def _executor_stopped(self, child: Child) -> bool:
        """End the executor's job and see its last message, so that nothing of this job is left on the channel
        for the next one (its reader stops at `stopped`)."""
        try:
            child.send({"type": "stop"})
            deadline = Deadline(self.lane.freezer, STOP_WAIT_S)
            while True:
                message = self.messages.next(deadline, None)
                if message["type"] == "stopped":
                    return True
                if message["type"] in STREAM_EVENTS:
                    return False
        except (OSError, TimeoutError):
            return False

    def _executor_reusable(self) -> bool:
        """Only an executor whose evaluation ended cleanly serves again, and for a bounded number of them."""
        child = self.executor
        child.jobs = getattr(child, "jobs", 0) + 1
        return (self.lane.backend == "cuda" and self.result.status in (Status.OK, Status.INCORRECT)
                and not self.result.violations and not child.exited and child.jobs < EXECUTOR_JOBS
                and not child.over_memory_limit(self.options.memory_limit_mb))

    def _run(self) -> None:
        started = time.monotonic()
        prepared = self.judge.prepare()
        self.result.device = prepared["device"]
        self.result.degenerate_reference = any(prepared["degenerate"])
        _layer(self.result, "reference", Outcome.PASSED, started)
        self.estimate = self.lane.estimate_bytes(prepared["input_bytes"], prepared["output_bytes"])
        self.minimum = self.lane.minimum_bytes(prepared["input_bytes"], prepared["output_bytes"])
        cancelled = (lambda: self.cancel.is_set()) if self.cancel is not None else (lambda: False)
        try:
            with self.lane.memory.reserve(self.estimate, cancelled) as waited:
                if waited >= 0.01:
                    self.memory_s += waited
                    self.memory_notes.append(f"{waited:.1f} s for the lane's budget")
                self._with_candidate(prepared, cancelled)
        except TimeoutError:
            raise Cancelled() from None

    @contextlib.contextmanager
    def _admitted(self, cancelled: Callable[[], bool]) -> Iterator[None]:
        """Held while the candidate's GPU work runs, entered once the GPU has this evaluation's estimate free now
        (lane.free_memory: other processes may hold what the lane's budget counted on), or, when nothing else of
        the lane is admitted, its minimum (lane.minimum_bytes) and no more memory coming back (FreeMemory.settle_s);
        the wait is not charged to the evaluation's time limit."""
        need = min(self.estimate, self.lane.memory.total)  # as the budget does: larger ones run alone, not never
        try:
            with self.lane.free_memory.admitted(need, cancelled, minimum=min(self.minimum, need)) as wait:
                self.started_alone_with = None if wait.started_with is None else \
                    max(0, wait.started_with - self.lane.free_memory.margin)
                if self.lane.free_memory.watching:
                    self.memory_s += wait.seconds
                    self.memory_notes.append(wait.describe())
                yield
        except MemoryShort as exc:
            others = exc.needed - need - self.lane.free_memory.margin
            raise _Finish(Status.INFRA_ERROR, f"{exc}; this evaluation needs {gigabytes(need)} (the task's "
                                              f"estimate), {gigabytes(self.lane.free_memory.margin)} of margin and "
                                              f"{gigabytes(others)} the lane's running evaluations were admitted "
                                              "with") from None

    def _job(self) -> dict:
        o, lane = self.options, self.lane
        return {
            "type": "job",
            "backend": lane.backend,
            "reference_path": str(self.folder / "reference.py"),
            "input_sets": list(self.problem.input_sets),
            "outputs_dir": self.outputs_dir,
            "seed": o.seed,
            "trials": o.trials,
            "policy": o.policy.value,
            "warmup_runs": o.warmup_runs,
            "timing_runs": o.timing_runs,
            "ipc_min_bytes": self.ipc_min_bytes,
            "remote_build": lane.builder is not None,
            "memory_limit_mb": o.memory_limit_mb,
            "file_limit_mb": 65536,
            "cpu_limit_s": int(o.timeout_s * 2) + 30,
        }

    def _with_candidate(self, prepared: dict, cancelled: Callable[[], bool]) -> None:
        if not self.lane.executor_design:
            with self._admitted(cancelled):
                self._in_process(prepared, cancelled)
            return
        program, constants = self._trace(cancelled)
        self._execute(prepared, program, constants, cancelled)

    def _in_process(self, prepared: dict, cancelled: Callable[[], bool]) -> None:
        """The in-process design: one candidate process runs the harness, the trials and the timing."""
        waited = time.monotonic()
        self.child = child = self.lane.candidates.acquire(cancelled)
        self.acquire_s = time.monotonic() - waited
        child.watch_memory(self.options.memory_limit_mb)
        nonce = secrets.token_hex(16)
        # Its sources and outputs live in its own folder, the only one the jailed candidate may read beyond the
        # system's and the sandbox's (no other evaluation's files) and the only one it may write.
        self.folder = child.private_dir
        for name, source in self.sources.items():
            (self.folder / name).write_text(source)
        outputs = self.folder / "outputs"
        outputs.mkdir()
        # Resolved once, here: a hand-over must name a file directly in it (messages.check_output_path).
        self.outputs_dir = os.path.realpath(outputs)
        job = {**self._job(), "candidate_path": str(self.folder / "candidate.py")}
        check = schema.Schema(len(self.problem.input_sets) + 1, self.options.trials, self.outputs_dir,
                              self.ipc_min_bytes).check
        child.receiver.max_bytes = CANDIDATE_FRAME_BYTES
        messages = MessageStream(child, nonce, check)
        deadline = Deadline(self.lane.freezer, self.options.timeout_s, of=child)
        try:
            child.send({**job, "nonce": nonce})
            self._converse(messages, deadline, prepared, job)
        finally:
            messages.close()


    def _trace(self, cancelled: Callable[[], bool]) -> tuple[dict, Path | None]:
        """The candidate's own process (jailed, no GPU, no input values) turns forward into a launch program;
        returns it, checked, with the path of its constants' file."""
        waited = time.monotonic()
        self.child = tracer = self.lane.candidates.acquire(cancelled)
        self.acquire_s += time.monotonic() - waited
        tracer.watch_memory(self.options.memory_limit_mb)
        self.folder = tracer.private_dir
        for name, source in self.sources.items():
            (self.folder / name).write_text(source)
        o = self.options
        job = {"type": "job", "backend": self.lane.backend, "reference_path": str(self.folder / "reference.py"),
               "candidate_path": str(self.folder / "candidate.py"), "input_sets": list(self.problem.input_sets),
               "seed": o.seed, "device_properties": self.lane.device_properties, "memory_limit_mb": o.memory_limit_mb,
               "file_limit_mb": 65536, "cpu_limit_s": int(o.timeout_s * 2) + 30}
        nonce = secrets.token_hex(16)
        tracer.receiver.max_bytes = CANDIDATE_FRAME_BYTES
        check = schema.Schema(len(self.problem.input_sets) + 1, o.trials, str(self.folder), None).check
        messages = MessageStream(tracer, nonce, check)
        deadline = Deadline(self.lane.freezer, o.timeout_s)
        self.candidate_ran = True
        started = time.monotonic()
        try:
            tracer.send({**job, "nonce": nonce})
            while True:
                try:
                    message = messages.next(deadline, self.cancel)
                except TimeoutError:
                    raise _Finish(Status.TIMEOUT, f"the candidate did not finish tracing within {o.timeout_s:.0f} s") from None
                kind = message["type"]
                if kind not in _TRACER_MESSAGES and kind not in STREAM_EVENTS:
                    raise self._tampering(schema.CHANNEL_RULE, f"a {kind!r} message from the candidate's process")
                self.seen[kind] = message
                self._failure(kind, message)
                if kind == "unsupported":
                    raise _Finish(Status.RUNTIME_ERROR, f"unsupported: {message['error']}")
                if kind == "program":
                    break
        finally:
            messages.close()
        if tracer.over_memory_limit(o.memory_limit_mb):
            raise _Finish(Status.RUNTIME_ERROR, f"memory limit of {o.memory_limit_mb} MB exceeded "
                                                "(resident memory and the files in its folder)")
        tracer.kill()  # gone before its files are read: nothing changes them any more (the reads check anyway)
        program = self._read_program()
        _layer(self.result, "trace", Outcome.PASSED, started,
               f"{len(program['kernels'])} kernels, {sum(len(s['steps']) for s in program['sets'])} steps")
        return program, (self.folder / CONSTANTS_FILE if program["constants"] else None)

    def _read_program(self) -> dict:
        """The tracer's program file, read without following links and within its size limit
        (untrusted_files: a check by path and a later read of the path are two lookups)."""
        try:
            program = json.loads(untrusted_files.read_beneath(os.path.realpath(self.folder), PROGRAM_FILE,
                                                              MAX_PROGRAM_BYTES))
            check_program(program)
        except (untrusted_files.NotARegularFile, untrusted_files.TooLarge) as exc:
            raise self._tampering("malformed-program", f"no program file of at most {MAX_PROGRAM_BYTES} bytes "
                                                       f"({exc})") from None
        except Exception as exc:  # noqa: BLE001 - whatever the candidate's file does to the reading is its own
            raise self._tampering("malformed-program", f"{type(exc).__name__}: {exc}") from None
        return program

    def _execute(self, prepared: dict, program: dict, constants: Path | None, cancelled: Callable[[], bool]) -> None:
        """An executor (the GPU's, reused between evaluations) replays the program on the inputs; the judge
        compares every trial's outputs; the executor's timing is checked against the server's clock. An executor
        out of GPU memory because other processes held it (out_of_memory_is_load) is load: the evaluation starts
        over with a fresh executor, MEMORY_WAITS_S apart and each time once its memory is free, and ends
        infra_error only when that happened every time."""
        tracer, self.child = self.child, None
        tracer.kill(wait=False)
        self.tracer_output = tracer.output  # read at the end, when the verdict says how long to wait for it
        try:
            for pause in (*MEMORY_WAITS_S, None):
                layers = len(self.result.layers)
                try:
                    with self._admitted(cancelled):
                        self._start_executor(prepared, program, constants, cancelled)
                    return
                except _LoadShortage as shortage:
                    self._failed_before_shortage(shortage)
                    del self.result.layers[layers:]  # the attempt's own layers; the next one reports its own
                    self._next_attempt()
                    if pause is None:
                        raise _Finish(Status.INFRA_ERROR, f"the executor ran out of GPU memory "
                                                          f"{len(MEMORY_WAITS_S) + 1} times within the task's share "
                                                          f"while other processes held the GPU: {shortage}") from None
                    log.warning("%s; trying again in %g s", shortage, pause)
                    self.memory_notes.append(f"{shortage}; tried again")
                    if self.judge.cancel.wait(pause):
                        raise Cancelled() from None
                    self.memory_s += pause
        finally:
            tracer.close(wait=False)  # its folder (the constants) goes with it

    def _failed_before_shortage(self, shortage: _LoadShortage) -> None:
        """A trial the judge already found wrong stands, whatever came after it: a retry is not a new chance."""
        first = self._first_wrong_trial()
        if first:
            raise _Finish(Status.INCORRECT, f"{first} (then {shortage})")

    def _first_wrong_trial(self) -> str:
        """The first trial the judge found wrong, in words ("" when none is)."""
        names = self.judge.prepared["set_names"]
        return next((f"{names[s]} trial {t}: {c['message']}" for (s, t), c in sorted(self.trials.items())
                     if not c["passed"]), "")

    def _next_attempt(self) -> None:
        """After a load out-of-memory: the executor goes (a process whose allocation failed is not trusted with
        another job), and the trials start over on the same seeds (a fresh executor keeps nothing of the last
        one's): a kernel that could make an out-of-memory when it sees inputs it would get wrong draws no other
        inputs by it (red team 10)."""
        self.lane.executors.discard(self.executor)
        if self.messages is not None:
            self.messages.close()
        self.child = self.executor = self.messages = None
        self.trials.clear()
        self.handed_over, self.resend_due = 0, False
        self.handover_changed.clear()
        self.seen.clear()
        self.builds = {"build_request": 0, "ptxas_request": 0}
        self.result.compiled, self.result.triton_launches = False, 0
        self.result.trials_passed, self.result.max_abs_error = 0, None

    def _start_executor(self, prepared: dict, program: dict, constants: Path | None,
                        cancelled: Callable[[], bool]) -> None:
        waited = time.monotonic()
        self.child = executor = self.lane.executors.acquire(cancelled)
        self.acquire_s += time.monotonic() - waited
        self.executor = executor
        self.candidate_ran = False
        executor.watch_memory(self.options.memory_limit_mb)
        self.folder = executor.private_dir / f"job-{secrets.token_hex(8)}"
        self.folder.mkdir()
        (self.folder / "reference.py").write_text(self.sources["reference.py"])
        if constants is not None:
            try:
                untrusted_files.copy_beneath(os.path.realpath(constants.parent), constants.name,
                                             str(self.folder / CONSTANTS_FILE), self.options.memory_limit_mb << 20)
            except (untrusted_files.NotARegularFile, untrusted_files.TooLarge) as exc:
                raise self._tampering("malformed-program", f"the program's constants are missing or too large "
                                                           f"({exc})") from None
        outputs = self.folder / "outputs"
        outputs.mkdir()
        # Resolved once, here: a hand-over must name a file directly in it (messages.check_output_path).
        self.outputs_dir = os.path.realpath(outputs)
        max_checks = MAX_TIMING_CHECKS if self.timing_checks else 0
        job = {**self._job(), "program": program, "folder": str(self.folder),
               "constants_path": str(self.folder / CONSTANTS_FILE), "trial_key": self.lane.trial_key,
               "trial_seeds": self.trial_seeds, "max_timing_checks": max_checks, "timing_lead_us": timing_lead_us(),
               "memory_cap_bytes": EXECUTOR_MEMORY_FACTOR * self.estimate}
        check = schema.Schema(len(self.problem.input_sets) + 1, self.options.trials, self.outputs_dir,
                              self.ipc_min_bytes, timing_checks=max_checks).check
        executor.receiver.max_bytes = CANDIDATE_FRAME_BYTES
        nonce = secrets.token_hex(16)
        # Closed once the executor is released or discarded (run): its last message is read on this stream.
        self.cpu = CpuTrace(executor.pid, since=getattr(executor, "cpu_released", None))
        self.messages = messages = MessageStream(executor, nonce, check, last=frozenset({"stopped"}), trace=self.cpu)
        deadline = Deadline(self.lane.freezer, self.options.timeout_s, of=executor)
        try:
            executor.send({**job, "nonce": nonce})
        except protocol.ProtocolError as exc:  # a program too large for the channel: the candidate made it
            raise self._tampering("malformed-program", f"the program cannot be sent to the executor: {exc}") from None
        self._converse(messages, deadline, prepared, job)

    def _converse(self, messages: MessageStream, deadline: Deadline, prepared: dict, job: dict) -> None:
        child = self.child
        started = time.monotonic()
        while True:
            try:
                message = messages.next(deadline, self.cancel)
            except TimeoutError:
                if "inputs_ready" not in self.seen:
                    raise _Finish(Status.INFRA_ERROR, "the reference's inputs were not ready within "
                                                      f"{self.options.timeout_s:.0f} s") from None
                raise _Finish(Status.TIMEOUT, f"the candidate did not finish within {self.options.timeout_s:.0f} s") from None
            kind = message["type"]
            self._expect(kind, self._expected_now(job), message)
            self.seen[kind] = message
            self._failure(kind, message)
            if kind == "inputs_ready":
                self.candidate_ran = True  # the program's kernels run from here on
            if kind == "inputs_ready" and self.trial_seeds is None:
                self._check_inputs_deterministic(message["fingerprints"], prepared)
            elif kind in ("build_request", "ptxas_request"):
                self._build(kind, message, deadline)
            elif kind == "trial_outputs":
                waited = time.monotonic()
                self._compare(message)
                deadline.extend(time.monotonic() - waited)
            elif kind == "outputs_done":
                if not self._verdict(message, prepared, started):
                    return
                if self.lane.executor_design:
                    self._time(messages, deadline, job)
                else:
                    self._time_in_process(messages, deadline, job)
                return

    def _trial_columns(self, grid: list[list[str]]) -> list[list[str]]:
        """The judge's fingerprints of the trials alone (without the timing check's extra trial)."""
        return [row[: self.options.trials] for row in grid]

    def _judged_fingerprints(self, prepared: dict) -> tuple[list[list[str]], list[list[str]]]:
        """The judge's fingerprints of every trial's inputs and expected outputs: the prepared trials', or, on
        seeds new to this evaluation, the ones it made when it compared each trial."""
        if self.trial_seeds is None:
            return self._trial_columns(prepared["input_fingerprints"]), prepared["output_fingerprints"]
        answers = [[self.trials[(s, t)] for t in range(self.options.trials)] for s in range(len(self.trial_seeds))]
        return ([[a.get("input_fingerprint") for a in row] for row in answers],
                [[a.get("expected_fingerprint") for a in row] for row in answers])

    def _check_inputs_deterministic(self, fingerprints: list[list[str]], prepared: dict) -> None:
        if fingerprints != self._judged_fingerprints(prepared)[0]:
            raise _Finish(Status.INFRA_ERROR, "get_inputs() is not deterministic under a seed: the judge's and "
                                              "the candidate process's inputs differ")

    def _expected_now(self, job: dict) -> set[str]:
        """The messages the protocol allows from the candidate at this point of the trials (stream events and
        failures aside, which may come at any point)."""
        if "inputs_ready" not in self.seen:
            return {"inputs_ready"}
        expected = {"trial_outputs"} if self.handed_over < len(self.positions) else {"outputs_done"}
        if self.resend_due:
            expected = {"trial_outputs"}
        return expected | self._builds_allowed(job)

    @staticmethod
    def _builds_allowed(job: dict) -> set[str]:
        """Requests to the trusted builder, allowed whenever Triton may compile (during timing too)."""
        if not job["remote_build"]:
            return set()
        return {"build_request", "ptxas_request"} if job["backend"] == "cuda" else {"build_request"}

    def _expect(self, kind: str, expected: set[str], message: dict, timing_check: int | None = None) -> None:
        """A message the protocol does not expect here is the candidate's tampering with the channel.
        `timing_check`: the only trial_outputs due are that checked run's (the first set's extra trials)."""
        if kind in STREAM_EVENTS or kind in ("internal_error", "jail_violation", "out_of_memory"):
            return
        if kind in ("compile_error", "runtime_error", "rejected", "unsupported") and "inputs_ready" in self.seen:
            return
        if kind not in expected:
            raise self._tampering(schema.CHANNEL_RULE, f"a {kind!r} message where the protocol expects "
                                                       f"{' or '.join(sorted(expected))}")
        if kind == "trial_outputs" and timing_check is not None:
            if (message["set"], message["trial"]) != (0, self.options.trials + timing_check):
                raise self._tampering(schema.CHANNEL_RULE, "outputs of another trial where the timed run's were due")
        elif kind == "trial_outputs":
            position = (message["set"], message["trial"])
            if position != self.positions[self.handed_over]:
                raise self._tampering(schema.CHANNEL_RULE, f"outputs of input set {position[0]} trial {position[1]} "
                                                           f"where those of {self.positions[self.handed_over]} were due")
            if self.resend_due and message["handover"]["kind"] != schema.FILE:
                raise self._tampering(schema.HANDOVER_RULE, "CUDA IPC handles again where the server asked for the "
                                                            "trial's outputs in a file")

    def _tampering(self, rule: str, error: str) -> _Finish:
        self.result.violations.append(Violation("runtime", rule, truncate(error, 500)))
        what = "a malformed output hand-over" if rule == schema.HANDOVER_RULE else "a message the protocol does not allow"
        return _Finish(Status.CHEAT, f"the candidate process sent {what}: {truncate(error, 500)}")

    def _build(self, kind: str, message: dict, deadline: Deadline) -> None:
        """A launcher (`build_request`) or a cubin (`ptxas_request`) from the lane's trusted builder, at most
        MAX_BUILDS of each per evaluation (a jailed candidate cannot build for itself). A request no honest
        Triton makes is `cheat`; source that does not compile is the candidate's compile error; a builder that
        fails is the sandbox's."""
        self.builds[kind] += 1
        if self.builds[kind] > MAX_BUILDS:
            raise _Finish(Status.RUNTIME_ERROR, f"more than {MAX_BUILDS} kernel signatures to build in one evaluation")
        waited = time.monotonic()
        try:
            answer = self.lane.build(message) if kind == "build_request" else self.lane.ptxas(message)
        except ServiceFailure as exc:
            raise _Finish(Status.INFRA_ERROR, f"the trusted builder failed: {exc}") from None
        if answer.get("type") == "refused":
            raise self._tampering("malformed-build-request", str(answer.get("error", "")))
        if answer.get("type") == "failed" and kind == "build_request":
            raise _Finish(Status.COMPILE_ERROR, f"Triton's launcher did not compile: {answer.get('error', '')}")
        if kind == "build_request":
            self.child.send({"type": "build_result", "path": self._hand_build(answer), "sha256": answer["sha256"]})
        else:
            self.child.send({"type": "ptxas_result", **{k: answer[k] for k in ("cubin", "error") if k in answer}})
        self.build_s += time.monotonic() - waited
        deadline.extend(time.monotonic() - waited)

    def _hand_build(self, answer: dict) -> str:
        """A copy of the trusted build in the candidate's own folder (a jailed candidate reads nothing in the work
        root, where the builds are kept); the candidate loads it only if it has the build's SHA-256."""
        source = Path(answer["path"])
        target = self.folder / "builds" / answer["key"] / source.name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, target)
        return str(target)

    def _compare(self, message: dict) -> None:
        ipc = message["handover"]["kind"] == schema.IPC
        if ipc and self.ipc_failed:
            # This evaluation's IPC failed before: files from now on, without asking the judge again.
            self.resend_due = True
            self.child.send({"type": "continue", "resend": schema.FILE})
            return
        if ipc:
            self.child.freeze()  # it cannot touch its outputs while the judge reads them
        try:
            seed = self.trial_seeds[message["set"]][message["trial"]] if self.trial_seeds is not None else None
            answer = self.judge.compare(message, self.outputs_dir, self.ipc_min_bytes, seed=seed)
        finally:
            if ipc:
                self.child.thaw()
        if answer.get("type") == "malformed":
            raise self._tampering(str(answer.get("rule") or schema.HANDOVER_RULE), str(answer.get("error", "")))
        if answer.get("type") == "ipc_failed":
            if not ipc:
                raise _Finish(Status.INFRA_ERROR, "the judge answered a file hand-over as a failed IPC one")
            log.warning("CUDA IPC hand-over failed (%s); this evaluation uses files from now on", answer.get("error"))
            self.ipc_failed = self.resend_due = True
            self.child.send({"type": "continue", "resend": schema.FILE})
            return
        if answer.get("type") != "compared":
            raise _Finish(Status.INFRA_ERROR, f"the judge answered a comparison with {answer.get('type')!r}")
        if ipc:
            self.child.send({"type": "continue"})
        else:  # read: its space no longer counts against the candidate's limit (Child.watch_memory)
            with contextlib.suppress(OSError):
                os.unlink(message["handover"]["path"])  # checked to lie in the outputs folder (messages.py)
        position = (message["set"], message["trial"])
        self.trials[position] = answer
        self.handed_over += 1
        self.resend_due = False
        if answer.get("fingerprint") is not None and answer["fingerprint"] != message["fingerprint"]:
            self.handover_changed.append(position)

    def _failure(self, kind: str, message: dict) -> None:
        result, options = self.result, self.options
        if kind == "compile_error":
            result.layers.append(LayerResult("compile", Outcome.FAILED, 0.0, truncate(message.get("phase", ""), 500)))
            raise _Finish(Status.COMPILE_ERROR, f"{message.get('phase', '')}: {message.get('error', '')}")
        if kind == "runtime_error":
            result.compiled = "trial" in message.get("phase", "") or message.get("phase") == "timing"
            raise _Finish(Status.RUNTIME_ERROR, f"{message.get('phase', '')}: {message.get('error', '')}")
        if kind == "internal_error":
            status = Status.RUNTIME_ERROR if self.candidate_ran else Status.INFRA_ERROR
            raise _Finish(status, message.get("error", ""))
        if kind == "out_of_memory":
            raise self._executor_out_of_memory(message)
        if kind == "garbled":
            result.violations.append(Violation("runtime", "verdict-channel-tampering", message["error"]))
            raise _Finish(Status.CHEAT, "the candidate process wrote to the verdict channel")
        if kind == "malformed":
            raise self._tampering(message["rule"], message["error"])
        if kind == "rejected":
            rule = message["rule"] if message["rule"] in RUNTIME_RULES else "malformed-program"
            result.violations.append(Violation("runtime", rule, truncate(message["error"], 500)))
            raise _Finish(Status.CHEAT, f"the launch program was refused: {message['error']}")
        if kind == "unsupported":
            raise _Finish(Status.RUNTIME_ERROR, f"unsupported: {message['error']}")
        if kind == "jail_violation":
            rule = message.get("rule") if message.get("rule") in JAIL_RULES else "jail-escape-attempt"
            result.violations.append(Violation("jail", rule, truncate(str(message.get("message", "")), 500)))
            raise _Finish(Status.CHEAT, "the candidate tried to leave its jail")
        if kind == "exited":
            child = self.child
            child.kill()
            if child.returncode() == -DENIED_SYSCALL_SIGNAL:
                result.violations.append(Violation("jail", "jail-denied-syscall", JAIL_RULES["jail-denied-syscall"]))
                raise _Finish(Status.CHEAT, "the candidate made a system call the jail denies")
            if child.memory_exceeded:
                raise _Finish(Status.RUNTIME_ERROR, f"memory limit of {options.memory_limit_mb} MB exceeded")
            what = "candidate process" if child is not self.executor else "executor"
            if not self.candidate_ran:
                raise _Finish(Status.INFRA_ERROR, f"{what} {child.describe_exit()} before running any "
                                                  f"candidate code: {child.output()[-1500:]}")
            raise _Finish(Status.RUNTIME_ERROR, f"{what} {child.describe_exit()}: {child.output()[-1500:]}")

    def _executor_out_of_memory(self, message: dict) -> Exception:
        """The executor's out-of-memory: load (_LoadShortage, tried again) before any of the candidate's kernels
        ran or within the evaluation's share (out_of_memory_is_load), else the candidate's runtime_error. Only the
        executor says it (trusted code measured it); from the candidate's own process it is tampering."""
        if self.child is not self.executor:
            return self._tampering(schema.CHANNEL_RULE, "an out-of-memory report from the candidate's own process")
        held, requested = message["held"], message.get("requested")
        device = self.lane.free_memory.read()
        asked = f"{gigabytes(held)} held" + (f" and {gigabytes(requested)} refused" if requested else "")
        # Started alone below its estimate, the evaluation's share is what the GPU had for it then: no more was
        # coming free (settle_s), so a try asking beyond it meets the same shortage every time, at the candidate's
        # own choice (an allocation between that and the estimate made any candidate infra_error after 5 tries,
        # each holding the lane alone: red team 11).
        share = self.estimate if self.started_alone_with is None else min(self.estimate, self.started_alone_with)
        if not self.candidate_ran or out_of_memory_is_load(held, requested, share, device):
            free = "" if device is None else f", {gigabytes(device.free)} free of {gigabytes(device.total)}"
            return _LoadShortage(f"the executor ran out of GPU memory ({asked}{free})")
        if share < self.estimate:
            return _Finish(Status.RUNTIME_ERROR, f"out of GPU memory: {asked}, beyond the {gigabytes(share)} the GPU "
                                                 f"had for it when it started alone (no more was coming free; the "
                                                 f"task's share is {gigabytes(self.estimate)}): {message['error']}")
        return _Finish(Status.RUNTIME_ERROR, f"out of GPU memory: {asked}, beyond this task's share of "
                                             f"{gigabytes(self.estimate)} or the device's: {message['error']}")

    def _verdict(self, outputs: dict, prepared: dict, started: float) -> bool:
        """Correctness and runtime layers; True when the candidate is to be timed."""
        result, options = self.result, self.options
        if self.child.over_memory_limit(options.memory_limit_mb):
            raise _Finish(Status.RUNTIME_ERROR, f"memory limit of {options.memory_limit_mb} MB exceeded "
                                                "(resident memory and the files in its folder)")
        result.compiled = True
        result.triton_launches = int(outputs["launches"])
        compared = [self.trials.get((s, t)) for s in range(len(prepared["input_fingerprints"]))
                    for t in range(options.trials)]
        if any(c is None for c in compared):
            raise _Finish(Status.INFRA_ERROR, "the candidate process finished without handing over every trial")
        result.trials = len(compared)
        result.trials_passed = sum(1 for c in compared if c["passed"])
        errors = [c["max_abs_error"] for c in compared if c.get("max_abs_error") is not None]
        result.max_abs_error = max(errors) if errors else None
        phases = outputs["phases"]
        result.layers.append(LayerResult("compile", Outcome.PASSED, round(phases["setup"] + phases["compile"], 6)))
        if self.trial_seeds is not None:
            self._check_inputs_deterministic(self.seen["inputs_ready"]["fingerprints"], prepared)
        judged_inputs, judged_outputs = self._judged_fingerprints(prepared)
        violations = [Violation(**v) for v in outputs["violations"]]
        if outputs["input_fingerprints"] != judged_inputs:
            violations.append(Violation("runtime", "inputs-tampered", RUNTIME_RULES["inputs-tampered"]))
        for candidate, expected in zip(outputs["output_fingerprints"], judged_outputs):
            violations += _ignored_inputs(candidate, expected)
        if self.handover_changed:
            s, t = self.handover_changed[0]
            violations.append(Violation("runtime", "outputs-changed-after-handover",
                                        f"input set {s} trial {t}: the outputs the judge read differ from the ones "
                                        "the forward returned"))
        violations = list(dict.fromkeys(violations))
        result.layers.append(LayerResult("runtime", Outcome.FAILED if violations else Outcome.PASSED,
                                         round(phases["trials"], 6), "; ".join(v.rule for v in violations)))
        correct = result.trials_passed == result.trials
        first = self._first_wrong_trial()
        _layer(result, "correctness", Outcome.PASSED if correct else Outcome.FAILED, started, first)
        if violations:
            result.violations += violations
            raise _Finish(Status.CHEAT, "runtime checks found violations")
        if not correct:
            raise _Finish(Status.INCORRECT, first)
        if not (options.time and self.lane.backend == "cuda"):
            _layer(result, "timing", Outcome.SKIPPED, time.monotonic(),
                   "no GPU: the interpreter is not timed" if self.lane.backend != "cuda" else "not asked for")
            result.status = Status.OK
            return False
        return True

    def _time(self, messages: MessageStream, deadline: Deadline, job: dict) -> None:
        """The candidate timed with the GPU to itself; the reference's time from the judge (cached).

        The executor times the replay with CUDA events, in a context the candidate's kernels run in, so the
        figure is checked from outside: the server times, on its own clock, the same batch of runs and (per lane,
        task and batch length: the quickest measured, measured again now and then, EMPTY_BATCH_REFRESH) the batch
        with nothing in it (flushes, synchronisations, input generation, copies). The candidate's time is never
        below OUTSIDE_FLOOR of what that difference leaves per run. Every
        timed run has fresh inputs, and some of them, chosen in secret, are the judge's timing checks
        (_timing_check). The server's clock is coarse: a batch it saw as slow (the floor binding) is timed once
        more, with new secrets, and the floor takes the lower of the two clocks; the executor's figure stays the
        first batch's, so a kernel that makes the floor bind on purpose draws no second figure of its own (red
        team 7). A forged executor figure meets the floor again; an honest kernel in a noisy batch does not."""
        started = time.monotonic()
        attempts = [self._timed_attempt(messages, deadline, job)]
        if not attempts[0].trusted and TIMING_ATTEMPTS > 1:
            # ... and the empty batch measured again (the quickest ever kept), both batches set against it.
            self.remeasure_empty = True
            attempts.append(self._timed_attempt(messages, deadline, job))
            attempts = [attempt.against(attempts[-1].empty_s) for attempt in attempts]
        first = attempts[0]
        floor_us = OUTSIDE_FLOOR * min(attempt.outside_us for attempt in attempts)
        result = self.result
        result.candidate_timing, result.ref_timing = first.candidate, first.reference
        result.candidate_time_us = max(first.candidate.median_us, floor_us)
        result.ref_time_us = first.reference.median_us
        result.speedup = first.reference.median_us / max(result.candidate_time_us, 1e-9)
        result.speedup_flagged = result.speedup > self.options.implausible_speedup
        detail = "; ".join(attempt.describe() for attempt in attempts)
        if first.candidate.median_us < floor_us:
            detail += f" (the executor's {first.candidate.median_us:.1f} us is below {OUTSIDE_FLOOR} of it: not used)"
        _layer(result, "timing", Outcome.PASSED, started, detail)
        result.status = Status.OK

    def _timed_attempt(self, messages: MessageStream, deadline: Deadline, job: dict) -> "_TimedAttempt":
        """One timed batch on new secrets, the GPU held; then, after the hold, its checks (the empty batch measured
        again first when `remeasure_empty` says so: EMPTY_BATCH_REFRESH)."""
        waited = time.monotonic()
        reference_due = self.judge.reference_due(EXECUTOR_TIMING_METHOD, fresh_inputs=True)
        with self.lane.gpu_alone(keep=self.child, judge=self.judge.service, drain=reference_due):
            deadline.extend(time.monotonic() - waited)
            started = time.monotonic()
            # The empty batch (flushes, synchronisations, input generation) depends on the GPU and the task,
            # not on the candidate: measured once per lane and task (a group of candidates shares it).
            # ... and on the batch's length: keyed by both (another client's options must not set this one's floor)
            batch_key = (self.problem.key, self.options.warmup_runs, self.options.timing_runs)
            empty_s = self.lane.empty_batch_s.get(batch_key)
            remeasure, self.remeasure_empty = self.remeasure_empty, False
            if remeasure or empty_s is None or secrets.SystemRandom().random() < EMPTY_BATCH_REFRESH:
                # The timed batch copies samples of its checked runs' outputs: the empty one copies as many bytes.
                # Measured EMPTY_BATCHES times, the quickest kept: an executor's first timed batch pays first-time
                # costs (the flush buffer's allocation, the lead's calibration), and an empty batch read too
                # long lowers the floor for every later candidate of the task (to zero on an H100).
                copy_bytes = int((self.judge.prepared or {}).get("output_bytes", 0))
                # Kept: the quickest ever measured for the key (a measurement that read long, because another
                # process's queued GPU work ran through it, is replaced by the next one that did not).
                # Once kept, one measurement more at a time (the first-time costs are paid).
                calibrating = time.monotonic()
                measured = [self._timed_order(
                    {**timing_order(self.options.timing_runs, self.timing_checks), "type": "calibrate",
                     "copy_bytes": copy_bytes}, "calibrated", messages, deadline, job)
                    for _ in range(EMPTY_BATCHES if empty_s is None else 1)]
                deadline.extend(time.monotonic() - calibrating)  # the server's measurement, not the candidate's time
                empty_s = min(measured if empty_s is None else [*measured, empty_s])
                self.lane.empty_batch_s[batch_key] = empty_s
            order = timing_order(self.options.timing_runs, self.timing_checks)
            cpu = CpuTrace(self.child.pid)
            batch_s = self._timed_order(order, "timing", messages, deadline, job)
            cpu.mark("timing")
            candidate = TimingStats(**self.seen["timing"]["candidate"])
            # The reference is timed as the executor times candidates (CUDA events), whatever its message says: a
            # figure forged in the executor's memory does not choose the reference's protocol (red team 13).
            timing_reference = time.monotonic()
            reference = self.judge.time_reference(EXECUTOR_TIMING_METHOD, fresh_inputs=True, due=reference_due)
            deadline.extend(time.monotonic() - timing_reference)  # the judge's time, not the candidate's
            held_s = time.monotonic() - started
        log.debug("timing: waited %.1f ms for the GPU, held it %.1f ms (batch %.1f ms, empty batch %.1f ms); the batch "
                  "checked %d runs, the executor's CPU in it %.1f ms, its median %.1f us", (started - waited) * 1e3,
                  held_s * 1e3, batch_s * 1e3, empty_s * 1e3, len(order["checked_runs"]),
                  cpu.stages.get("timing", float("nan")) * 1e3, candidate.median_us)
        # The judge's comparisons share the GPU: after the hold, the hand-overs by file in one turn of the judge
        # (one wait for the gate, not one per check). A run's call follows the warm-up's.
        together = []
        for message, seed, run in zip(self._check_outputs(messages, deadline, len(order["checked_runs"])),
                                      order["check_seeds"], order["checked_runs"]):
            sample_seed = harness.call_sample_seed(order["sample_seed"], self.options.warmup_runs + run)
            if message["handover"]["kind"] == schema.FILE:
                together.append((message, seed, sample_seed))
            else:  # by IPC: the executor sends the next hand-over once this one is answered
                self._timing_check(message, seed, sample_seed, None)
        answers = self.judge.compare_together([(message, self.outputs_dir, self.ipc_min_bytes, seed, sample_seed)
                                               for message, seed, sample_seed in together]) if together else []
        for (message, seed, sample_seed), answer in zip(together, answers):
            self._timing_check(message, seed, sample_seed, answer)
        calls = self.options.warmup_runs + self.options.timing_runs
        return _TimedAttempt(candidate, reference, batch_s, empty_s, calls)

    def _check_outputs(self, messages: MessageStream, deadline: Deadline, checks: int) -> Iterator[dict]:
        """The executor's hand-overs of the checked runs' outputs, in order (each read when the caller wants
        the next: one by IPC is sent only once the last one was answered)."""
        for check in range(checks):
            while True:
                try:
                    message = messages.next(deadline, self.cancel)
                except TimeoutError:
                    raise _Finish(Status.TIMEOUT, "the executor did not hand over the timed run's outputs") from None
                kind = message["type"]
                self._expect(kind, {"trial_outputs"}, message, timing_check=check)
                self.seen[kind] = message
                self._failure(kind, message)
                if kind == "trial_outputs":
                    yield message
                    break

    def _timing_check(self, message: dict, seed: int, sample_seed: int, answer: dict | None) -> None:
        """The outputs of a checked run (chosen in secret, on inputs the judge knows): work skipped in the
        timed runs shows here; a kernel skipping a share s of the runs passes every check with probability
        about exp(-EXPECTED_TIMING_CHECKS * s) (timing_order). Outputs that differ are `incorrect` (they may be
        an honest kernel's numerical edge). `answer`: the judge's, when it compared them together with the
        others (JudgeLink.compare_together); None: compared now."""
        if answer is None:
            answer = self.judge.compare(message, self.outputs_dir, self.ipc_min_bytes, seed=seed,
                                        sample_seed=sample_seed)
        if answer.get("type") == "malformed":
            raise self._tampering(str(answer.get("rule") or schema.HANDOVER_RULE), str(answer.get("error", "")))
        if answer.get("type") != "compared":
            raise _Finish(Status.INFRA_ERROR, f"the judge answered the timing check with {answer.get('type')!r}")
        if message["handover"]["kind"] == schema.IPC:
            self.child.send({"type": "continue"})
        else:
            with contextlib.suppress(OSError):
                os.unlink(message["handover"]["path"])
        if not answer["passed"]:
            raise _Finish(Status.INCORRECT, f"a timed run's outputs (on fresh inputs) were wrong: {answer['message']}")

    def _timed_order(self, order: dict, answer: str, messages: MessageStream, deadline: Deadline, job: dict) -> float:
        """Send `order`, wait for `answer`; the seconds between, on the server's clock."""
        started = time.monotonic()
        self.child.send(order)
        while True:
            try:
                message = messages.next(deadline, self.cancel)
            except TimeoutError:
                raise _Finish(Status.TIMEOUT, f"the candidate did not finish timing within "
                                              f"{self.options.timeout_s:.0f} s") from None
            kind = message["type"]
            self._expect(kind, {answer} | self._builds_allowed(job), message)
            self.seen[kind] = message
            self._failure(kind, message)
            if kind in ("build_request", "ptxas_request"):
                self._build(kind, message, deadline)
            elif kind == answer:
                return time.monotonic() - started

    def _time_in_process(self, messages: MessageStream, deadline: Deadline, job: dict) -> None:
        """The in-process design's timing: the candidate process times itself (its report is its word)."""
        waited = time.monotonic()
        with self.lane.gpu_alone(keep=self.child, judge=self.judge.service, drain=True):
            deadline.extend(time.monotonic() - waited)
            started = time.monotonic()
            self._timed_order({"type": "time"}, "timing", messages, deadline, job)
            message = self.seen["timing"]
            violations = [Violation(**v) for v in message["violations"]]
            if violations:
                self.result.violations += [v for v in violations if v not in self.result.violations]
                _layer(self.result, "timing", Outcome.FAILED, started, "; ".join(v.rule for v in violations))
                raise _Finish(Status.CHEAT, "runtime checks during timing found violations")
            candidate = TimingStats(**message["candidate"])
            reference = self.judge.time_reference(candidate.method)
        result = self.result
        result.candidate_timing, result.ref_timing = candidate, reference
        result.candidate_time_us, result.ref_time_us = candidate.median_us, reference.median_us
        result.speedup = reference.median_us / max(candidate.median_us, 1e-9)
        result.speedup_flagged = result.speedup > self.options.implausible_speedup
        _layer(result, "timing", Outcome.PASSED, started, candidate.method)
        result.status = Status.OK


def _ignored_inputs(candidate: list[str], expected: list[str]) -> list[Violation]:
    """Identical outputs for two trials whose expected outputs differ: the answer did not follow the inputs."""
    for i in range(len(candidate)):
        for j in range(i + 1, len(candidate)):
            if candidate[i] == candidate[j] and expected[i] != expected[j]:
                return [Violation("runtime", "output-ignores-inputs",
                                  f"trials {i} and {j} had different inputs and answers but got the same output")]
    return []
