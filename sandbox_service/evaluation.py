"""One evaluation, orchestrated from the trusted side: layers, children, messages, verdict.

    format (here) -> static (here) -> reference child: reference outputs
                                   -> candidate child: ModelNew outputs + runtime monitor
                                   -> reference child compares (correctness) -> candidate timed alone on its GPU

Every failure maps to one status. What the candidate causes (crash, hang, memory, garbage on the
channel) is charged to the candidate; only what happens before its code runs, or in the reference child, is
`infra_error`, which trainers mask out instead of scoring.
"""

from __future__ import annotations

import dataclasses
import logging
import queue
import secrets
import shutil
import tempfile
import threading
import time
from pathlib import Path

from sandbox_service.options import EvalOptions
from sandbox_service.results import EvalResult, LayerResult, Outcome, Status, TimingStats, Violation, truncate
from sandbox_service.verifier.format import check_format
from sandbox_service.verifier.llm_judge import Judge, JudgeVerdict
from sandbox_service.verifier.runtime import RUNTIME_RULES
from sandbox_service.verifier.static_rules import check_static
from sandbox_service.worker import protocol
from sandbox_service.worker.pool import ChildStartError, TimingGate, WarmPool
from sandbox_service.worker.process import ChildProcess, ChildSpec

log = logging.getLogger(__name__)

REFERENCE = "reference"
CANDIDATE = "candidate"
# The reference child loads candidate outputs and compares them after the candidate finished; give it this long.
COMPARE_TIMEOUT_S = 120.0
CUDA_CHILD_THREADS = 4


@dataclasses.dataclass
class Lane:
    """Where evaluations run: one GPU (or the CPU interpreter), its warm children and its timing gate."""

    backend: str
    gpu: int | None
    candidate_pool: WarmPool
    reference_pool: WarmPool
    gate: TimingGate
    work_root: Path
    judge: Judge | None = None  # the optional LLM judge layer

    @classmethod
    def create(
        cls, backend: str, gpu: int | None, warm: int, work_root: Path, triton_cache: Path | None, judge: Judge | None = None
    ) -> Lane:
        # Interpreter children are CPU-bound and run side by side: one thread each. CUDA children only
        # feed the GPU, but host-side work in get_inputs() or torch glue benefits from a few threads.
        threads = 1 if backend == "interpreter" else CUDA_CHILD_THREADS

        def spec(role: str) -> ChildSpec:
            return ChildSpec(role=role, backend=backend, gpu=gpu, work_root=work_root, triton_cache_dir=triton_cache,
                             cpu_threads=threads)

        return cls(
            backend, gpu, WarmPool(spec(CANDIDATE), warm), WarmPool(spec(REFERENCE), warm), TimingGate(), work_root, judge
        )

    def close(self) -> None:
        self.candidate_pool.close()
        self.reference_pool.close()


class Cancelled(Exception):
    """The caller went away or the server is shutting down."""


class _Finish(Exception):
    """Ends the message loop with a final status."""

    def __init__(self, status: Status, error: str = ""):
        super().__init__(error)
        self.status = status
        self.error = error


def _layer(result: EvalResult, name: str, outcome: Outcome, started: float, detail: str = "") -> None:
    result.layers.append(LayerResult(name, outcome, round(time.monotonic() - started, 6), truncate(detail, 500)))


class _Session:
    """The two children of one evaluation and the messages coming back from them."""

    def __init__(self, lane: Lane, options: EvalOptions, cancel: threading.Event | None):
        self.lane = lane
        self.options = options
        self.cancel = cancel
        self.messages: queue.Queue = queue.Queue()
        self.children: dict[str, ChildProcess] = {}
        self.nonces = {REFERENCE: secrets.token_hex(16), CANDIDATE: secrets.token_hex(16)}
        self.deadline = time.monotonic() + options.timeout_s

    def start(self, role: str, pool: WarmPool, job: dict) -> None:
        child = pool.acquire()
        self.children[role] = child
        child.watch_memory(self.options.memory_limit_mb)
        child.send({**job, "type": "job", "nonce": self.nonces[role]})
        threading.Thread(target=self._pump, args=(role, child), daemon=True).start()

    def _pump(self, role: str, child: ChildProcess) -> None:
        while True:
            try:
                message = child.receive()
            except (protocol.ChannelClosed, OSError):
                self.messages.put((role, {"type": "exited"}))
                return
            except protocol.ProtocolError as exc:
                self.messages.put((role, {"type": "garbled", "error": str(exc)}))
                return
            if message.get("nonce") != self.nonces[role]:
                self.messages.put((role, {"type": "garbled", "error": "message without this evaluation's nonce"}))
                return
            self.messages.put((role, message))

    def next(self) -> tuple[str, dict]:
        while True:
            if self.cancel is not None and self.cancel.is_set():
                raise Cancelled()
            remaining = self.deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError()
            try:
                return self.messages.get(timeout=min(0.1, remaining))
            except queue.Empty:
                continue

    def extend_deadline(self, seconds: float) -> None:
        self.deadline += seconds

    def close(self) -> str:
        """Kill both children; return the candidate's captured output (for debugging only)."""
        output = ""
        for role, child in self.children.items():
            if role == CANDIDATE:
                output = child.output()
            child.close()
        return output


def evaluate(
    reference_source: str,
    candidate_source: str,
    options: EvalOptions,
    lane: Lane,
    cancel: threading.Event | None = None,
) -> EvalResult:
    """All layers: format and static screens here, then the children (runtime, correctness, timing)."""

    def run(result: EvalResult) -> None:
        code = _screen_source(reference_source, candidate_source, options, result)
        if code is None:
            return
        review = _JudgeReview.start(lane.judge, reference_source, code, options) if lane.judge else None
        _run_in_children(reference_source, code, options, lane, cancel, result)
        if review is not None:
            review.apply(result)

    return _finalized(run, options, lane)


class _JudgeReview:
    """The LLM judge reads the code while the children run; its findings join the verdict after.

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


def evaluate_local(
    reference_source: str, candidate_source: str, options: EvalOptions, backend: str = "auto", judge: Judge | None = None
) -> EvalResult:
    """One evaluation in this process's own lane (first GPU, or the interpreter): no server needed."""
    from sandbox_service.devices import resolve_backend

    info = resolve_backend(backend)
    with tempfile.TemporaryDirectory(prefix="tritonrl-local-") as root:
        gpu = info.gpus[0] if info.gpus else None
        lane = Lane.create(info.backend, gpu, warm=0, work_root=Path(root), triton_cache=None, judge=judge)
        try:
            return evaluate(reference_source, candidate_source, options, lane)
        finally:
            lane.close()


def run_isolated(
    reference_source: str, code: str, options: EvalOptions, lane: Lane, cancel: threading.Event | None = None
) -> EvalResult:
    """Only the child-process part, on code that skipped the source screens.

    For testing the isolation itself: the containment of code that the static layer would have
    rejected (writing to descriptors, crashing the interpreter). The server never calls this.
    """
    return _finalized(lambda result: _run_in_children(reference_source, code, options, lane, cancel, result), options, lane)


def _finalized(run, options: EvalOptions, lane: Lane) -> EvalResult:
    started = time.monotonic()
    result = EvalResult(status=Status.INFRA_ERROR, backend=lane.backend, trials=options.trials)
    try:
        run(result)
    except Cancelled:
        result.status, result.error = Status.INFRA_ERROR, "cancelled: the caller went away or the server is stopping"
    except ChildStartError as exc:
        result.status, result.error = Status.INFRA_ERROR, str(exc)
    except Exception as exc:  # noqa: BLE001 - a bug in the sandbox must not look like the candidate's fault
        log.exception("evaluation failed inside the sandbox")
        result.status, result.error = Status.INFRA_ERROR, truncate(f"sandbox error: {type(exc).__name__}: {exc}")
    result.valid = result.valid and result.status not in (Status.FORMAT_ERROR, Status.CHEAT)
    result.correct = result.status == Status.OK
    result.duration_s = round(time.monotonic() - started, 4)
    return result


def _screen_source(reference_source: str, candidate_source: str, options: EvalOptions, result: EvalResult) -> str | None:
    """Format and static layers, on text only. Returns the code to run, or None when rejected."""
    t = time.monotonic()
    fmt = check_format(candidate_source, options.candidate_format, options.max_source_bytes)
    if fmt.violations:
        result.violations += fmt.violations
        _layer(result, "format", Outcome.FAILED, t, fmt.violations[0].message)
        result.status = Status.FORMAT_ERROR
        return None
    _layer(result, "format", Outcome.PASSED, t)

    t = time.monotonic()
    static = check_static(fmt.code, options.policy, reference_source)
    if static:
        result.violations += static
        _layer(result, "static", Outcome.FAILED, t, "; ".join(v.rule for v in static))
        result.status = Status.CHEAT
        return None
    _layer(result, "static", Outcome.PASSED, t)
    result.valid = True
    return fmt.code


def _run_in_children(reference_source, code, options, lane, cancel, result: EvalResult) -> None:
    job_dir = Path(tempfile.mkdtemp(prefix="tritonrl-eval-", dir=lane.work_root))
    try:
        (job_dir / "reference.py").write_text(reference_source)
        (job_dir / "candidate.py").write_text(code)
        (job_dir / "outputs").mkdir()
        _run_children(job_dir, options, lane, cancel, result)
    finally:
        shutil.rmtree(job_dir, ignore_errors=True)


def _job(role: str, job_dir: Path, options: EvalOptions, lane: Lane) -> dict:
    job = {
        "backend": lane.backend,
        "reference_path": str(job_dir / "reference.py"),
        "outputs_dir": str(job_dir / "outputs"),
        "seed": options.seed,
        "trials": options.trials,
        "tolerances": {k: list(v) for k, v in options.tolerances.items()},
        "degenerate_rel_l2": options.degenerate_rel_l2,
        "memory_limit_mb": options.memory_limit_mb,
        "file_limit_mb": 65536,
        "cpu_limit_s": int(options.timeout_s * 2) + 30,
    }
    if role == CANDIDATE:
        job.update(
            candidate_path=str(job_dir / "candidate.py"),
            policy=options.policy.value,
            time=bool(options.time and lane.backend == "cuda"),
            warmup_runs=options.warmup_runs,
            timing_runs=options.timing_runs,
        )
    return job


def _run_children(job_dir: Path, options: EvalOptions, lane: Lane, cancel, result: EvalResult) -> None:
    session = _Session(lane, options, cancel)
    lane.gate.acquire_shared()
    gate_held = "shared"
    t = time.monotonic()
    try:
        session.start(REFERENCE, lane.reference_pool, _job(REFERENCE, job_dir, options, lane))
        session.start(CANDIDATE, lane.candidate_pool, _job(CANDIDATE, job_dir, options, lane))
        gate_held = _converse(session, job_dir, options, lane, result, t)
    except _Finish as finish:
        result.status = finish.status
        result.error = truncate(finish.error)
    finally:
        stdout = session.close()
        result.stdout_tail = truncate(stdout, 2000)
        if gate_held == "shared":
            lane.gate.release_shared()
        elif gate_held == "exclusive":
            lane.gate.release_exclusive()


def _converse(session: _Session, job_dir: Path, options: EvalOptions, lane: Lane, result: EvalResult, t: float) -> str:
    """The message loop. Returns which gate hold is left for the caller to release."""
    seen: dict[str, dict] = {}
    gate_held = "shared"
    compare_started = t
    while True:
        try:
            role, message = session.next()
        except TimeoutError:
            if "reference_ready" not in seen:
                raise _Finish(Status.INFRA_ERROR, f"the reference did not finish within {options.timeout_s:.0f} s")
            raise _Finish(Status.TIMEOUT, f"the candidate did not finish within {options.timeout_s:.0f} s") from None
        kind = message["type"]
        seen[kind] = message
        if role == REFERENCE:
            if kind in ("reference_error", "internal_error"):
                raise _Finish(Status.INFRA_ERROR, "reference failed: " + message.get("error", ""))
            if kind in ("exited", "garbled") and "verdict" not in seen:
                child = session.children[REFERENCE]
                raise _Finish(Status.INFRA_ERROR, f"the reference process {child.describe_exit()}: {child.output()[-1500:]}")
            if kind == "reference_ready":
                result.device = message["device"]
                result.degenerate_reference = bool(message["degenerate"])
        else:
            _candidate_failure(kind, message, seen, session, options, result, t)
        if "inputs_ready" in seen and "reference_ready" in seen and kind in ("inputs_ready", "reference_ready"):
            if seen["inputs_ready"]["fingerprint"] != seen["reference_ready"]["input_fingerprints"][0]:
                raise _Finish(Status.INFRA_ERROR, "get_inputs() is not deterministic under a seed: reference and candidate inputs differ")
        if kind in ("outputs_ready", "reference_ready") and "outputs_ready" in seen and "reference_ready" in seen:
            result.compiled = True
            result.triton_launches = int(seen["outputs_ready"]["launches"])
            session.children[REFERENCE].send({"type": "compare", "outputs_dir": str(job_dir / "outputs")})
            session.extend_deadline(COMPARE_TIMEOUT_S)
            compare_started = time.monotonic()
        if kind == "verdict":
            gate_held = _after_verdict(message, seen, session, options, lane, result, compare_started)
            if gate_held != "exclusive":
                return gate_held
        if kind == "timing":
            _record_timing(message, options, result)
            return gate_held


def _candidate_failure(kind, message, seen, session, options, result, t) -> None:
    if kind == "compile_error":
        _layer(result, "compile", Outcome.FAILED, t, message.get("phase", ""))
        raise _Finish(Status.COMPILE_ERROR, f"{message.get('phase', '')}: {message.get('error', '')}")
    if kind == "runtime_error":
        result.compiled = message.get("phase", "").startswith(("trial", "timing"))
        raise _Finish(Status.RUNTIME_ERROR, f"{message.get('phase', '')}: {message.get('error', '')}")
    if kind == "internal_error":
        status = Status.RUNTIME_ERROR if "inputs_ready" in seen else Status.INFRA_ERROR
        raise _Finish(status, message.get("error", ""))
    if kind == "garbled":
        result.violations.append(Violation("runtime", "verdict-channel-tampering", message["error"]))
        raise _Finish(Status.CHEAT, "the candidate process wrote to the verdict channel")
    if kind == "exited" and "timing" not in seen:
        child = session.children[CANDIDATE]
        child.kill()
        if child.memory_exceeded:
            raise _Finish(Status.RUNTIME_ERROR, f"memory limit of {options.memory_limit_mb} MB exceeded")
        if "inputs_ready" not in seen:
            raise _Finish(Status.INFRA_ERROR, f"candidate process {child.describe_exit()} before running any candidate code")
        raise _Finish(Status.RUNTIME_ERROR, f"candidate process {child.describe_exit()}: {child.output()[-1500:]}")


def _after_verdict(message, seen, session, options, lane: Lane, result: EvalResult, compare_started: float) -> str:
    trials = message["trials"]
    result.trials = len(trials)
    result.trials_passed = sum(1 for trial in trials if trial["passed"])
    errors = [trial["max_abs_error"] for trial in trials if trial["max_abs_error"] is not None]
    result.max_abs_error = max(errors) if errors else None
    outputs = seen["outputs_ready"]
    phases = outputs["phases"]
    # Durations measured in the candidate child: compilation (import, ModelNew, and Triton's JIT of the
    # first launch, in the first trial) and the monitored trials.
    result.layers.append(LayerResult("compile", Outcome.PASSED, round(phases["setup"] + phases["compile"], 6)))
    runtime_violations = [Violation(**v) for v in outputs["violations"]]
    reference = seen["reference_ready"]
    if outputs["input_fingerprints"] != reference["input_fingerprints"]:
        runtime_violations.append(Violation("runtime", "inputs-tampered", RUNTIME_RULES["inputs-tampered"]))
    runtime_violations += _ignored_inputs(outputs["output_fingerprints"], reference["output_fingerprints"])
    result.layers.append(LayerResult("runtime", Outcome.FAILED if runtime_violations else Outcome.PASSED,
                                     round(phases["trials"], 6), "; ".join(v.rule for v in runtime_violations)))
    correct = result.trials_passed == result.trials
    first_failure = next((trial["message"] for trial in trials if not trial["passed"]), "")
    _layer(result, "correctness", Outcome.PASSED if correct else Outcome.FAILED, compare_started, first_failure)
    if runtime_violations:
        result.violations += runtime_violations
        raise _Finish(Status.CHEAT, "runtime checks found violations")
    if not correct:
        raise _Finish(Status.INCORRECT, first_failure)
    if not (options.time and lane.backend == "cuda"):
        session.children[CANDIDATE].send({"type": "stop"})
        _layer(result, "timing", Outcome.SKIPPED, time.monotonic(), "no GPU: the interpreter is not timed")
        result.status = Status.OK
        return "shared"
    lane.gate.release_shared()
    waited = time.monotonic()
    lane.gate.acquire_exclusive()
    session.extend_deadline(time.monotonic() - waited)
    session.children[CANDIDATE].send({"type": "time"})
    return "exclusive"


def _ignored_inputs(candidate: list[str], expected: list[str]) -> list[Violation]:
    """Identical outputs for two trials whose expected outputs differ: the answer did not follow the inputs."""
    for i in range(len(candidate)):
        for j in range(i + 1, len(candidate)):
            if candidate[i] == candidate[j] and expected[i] != expected[j]:
                return [Violation("runtime", "output-ignores-inputs",
                                  f"trials {i} and {j} had different inputs and answers but got the same output")]
    return []


def _record_timing(message: dict, options: EvalOptions, result: EvalResult) -> None:
    started = time.monotonic()
    violations = [Violation(**v) for v in message["violations"]]
    if violations:
        result.violations += [v for v in violations if v not in result.violations]
        _layer(result, "timing", Outcome.FAILED, started, "; ".join(v.rule for v in violations))
        raise _Finish(Status.CHEAT, "runtime checks during timing found violations")
    result.candidate_timing = TimingStats(**message["candidate"])
    result.ref_timing = TimingStats(**message["reference"])
    result.candidate_time_us = result.candidate_timing.median_us
    result.ref_time_us = result.ref_timing.median_us
    result.speedup = result.ref_time_us / max(result.candidate_time_us, 1e-9)
    result.speedup_flagged = result.speedup > options.implausible_speedup
    _layer(result, "timing", Outcome.PASSED, started, result.candidate_timing.method)
    result.status = Status.OK
