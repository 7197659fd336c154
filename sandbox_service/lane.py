"""A lane: where evaluations run (one GPU, or the CPU interpreter) and the processes that serve it.

    template process (zygote) --fork--> candidate processes (one evaluation each, then killed)
                              --fork--> validator processes (one reference each, then killed)
                              --fork--> inductor processes (one reference compiled by Inductor, then killed)
                              --fork--> judges (long-lived, trusted code only: references, comparisons)
                              --fork--> builder (long-lived, trusted: Triton's C launchers, CUDA only)

Plus the lane's timing gate (timing has the GPU alone: every other process of the lane that can reach the GPU,
the other judges included, is frozen meanwhile), its GPU memory budget and the device's free memory (each
evaluation waits for both), the optional LLM judge and the screen workers that run the format and static layers
(verifier/screen_pool.py: the server's, shared by its lanes, or the lane's own).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
import json
import logging
import os
import secrets
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future
from pathlib import Path

from sandbox_service.devices import device_memory_reader, reaches_pageable_host_memory
from sandbox_service.jail import shared_writable
from sandbox_service.jail.privileges import make_undumpable
from sandbox_service.options import InputSet
from sandbox_service.results import TimingStats
from sandbox_service.verifier.llm_judge import Judge as LLMJudge
from sandbox_service.verifier.screen_pool import ScreenPool
from sandbox_service.worker.pool import (READY_TIMEOUT_S, CandidatePool, Freezer, FreeMemory, MemoryBudget,
                                        TimingGate)
from sandbox_service.worker.process import Child, ChildSpec
from sandbox_service.worker.service import ServiceFailure, ServiceProcess
from sandbox_service.worker.zygote import ChildStartError, Zygote, wait_ready

log = logging.getLogger(__name__)

CANDIDATE, TRACER, EXECUTOR, VALIDATOR, INDUCTOR, JUDGE, BUILDER = (
    "candidate", "tracer", "executor", "validator", "inductor", "judge", "builder")
# Which design evaluates candidates: "executor" (the candidate's Python traced without GPU or inputs, a trusted
# executor replays the program; the default) or "in-process" (the harness inside the candidate's process), kept
# until the executor meets issue 20's throughput targets (docs/security.md); the server's environment chooses.
DESIGN_ENV = "TRITONRL_SANDBOX_DESIGN"
EXECUTOR_DESIGN, IN_PROCESS_DESIGN = "executor", "in-process"
# Evaluations one executor serves before it is replaced: a bound on how long anything a kernel left in its
# CUDA context (which the executor cannot inspect) can last. Any failure replaces it at once.
EXECUTOR_JOBS = 64
# What candidate code asking torch.cuda about the device is told on a lane without one (an H100's figures).
INTERPRETER_DEVICE = {"name": "cpu (triton interpreter)", "major": 9, "minor": 0, "multi_processor_count": 132,
                      "total_memory": 80 << 30, "L2_cache_size": 50 << 20, "warp_size": 32,
                      "max_threads_per_multi_processor": 2048, "regs_per_multiprocessor": 65536}
CUDA_CHILD_THREADS = 4
# CUDA IPC instead of a file for a trial's outputs from this size up (the copy through host memory and a
# file costs about a second per GB; the IPC hand-over costs a round trip of milliseconds).
# Measured on an H100: for 16 MB outputs IPC was slower than files (the judge maps and unmaps every handle).
IPC_MIN_BYTES = 256 << 20
# Judges that may keep one task: a GRPO group of one task's candidates is compared on them alone, so with 2 a
# group of 16 queued behind two judges while the others idled (the benchmark's mix of five tasks showed no clear
# difference: 654, 687 and 705 timed evaluations a minute with 2, 4 and 8, run in that order, and a later run gains
# 10-15% by its place alone: benchmarks/RESULTS.md). Each keeps its own copy of a task's prepared reference.
JUDGES_PER_TASK = 4
JUDGES_PER_TASK_ENV = "TRITONRL_JUDGES_PER_TASK"
CONTEXT_BYTES = 640 << 20
JUDGE_MEMORY_LIMIT_MB = 96 * 1024
# How long an evaluation waits for the GPU to have its memory free (FreeMemory) before it ends infra_error: a
# trainer's step or another evaluation gives memory back within minutes; a GPU held longer than this by others is
# one the sandbox should not share.
FREE_MEMORY_WAIT_S = 600.0
# While an evaluation waits for GPU memory the judges are asked to give back their kept expected outputs and
# allocator caches at most this often (a trim costs a recomputed trial later), each answering within the timeout.
JUDGE_TRIM_INTERVAL_S = 5.0
JUDGE_TRIM_TIMEOUT_S = 10.0
BUILD_TIMEOUT_S = 120.0
# Candidate processes making their CUDA context at once (worker/pool.py says why few); the server's
# TRITONRL_CONTEXT_STARTS overrides it.
CONTEXT_STARTS = 8
CONTEXT_STARTS_ENV = "TRITONRL_CONTEXT_STARTS"


def judges_per_task() -> int:
    """JUDGES_PER_TASK, or the environment's TRITONRL_JUDGES_PER_TASK (a whole number of at least 1)."""
    value = os.environ.get(JUDGES_PER_TASK_ENV, "").strip()
    if not value:
        return JUDGES_PER_TASK
    if not value.isdigit() or int(value) < 1:
        raise ValueError(f"{JUDGES_PER_TASK_ENV}={value!r}: expected a whole number of judges of at least 1")
    return int(value)


@dataclasses.dataclass(frozen=True)
class LaneConfig:
    backend: str  # "cuda" or "interpreter"
    gpu: int | None
    work_root: Path
    warm: int = 2  # candidate processes kept forked and ready
    starting: int = CONTEXT_STARTS  # of which at most this many start (make their CUDA context) at once
    judges: int = 1
    gpu_memory_bytes: int = 0  # 0: no GPU memory budget (the interpreter)
    llm_judge: LLMJudge | None = None
    design: str = EXECUTOR_DESIGN
    screens: ScreenPool | None = None  # shared with other lanes (the scheduler's); None: the lane has its own


def _device_properties(backend: str, gpu: int | None) -> dict:
    """What candidate code is told when it asks torch.cuda about its device (it has none of its own)."""
    if backend != "cuda":
        return dict(INTERPRETER_DEVICE)
    import torch

    props = torch.cuda.get_device_properties(gpu or 0)
    found = {key: getattr(props, key) for key in INTERPRETER_DEVICE if hasattr(props, key)}
    return {**INTERPRETER_DEVICE, **found}


def reference_key(reference_source: str, input_sets: Sequence[InputSet]) -> str:
    """A reference with its input sets, whatever the evaluation options: what its sizes depend on."""
    identity = json.dumps([reference_source, [s.to_dict() for s in input_sets]], sort_keys=True)
    return hashlib.sha256(identity.encode()).hexdigest()


class Lane:
    def __init__(self, config: LaneConfig):
        self.config = config
        self.backend = config.backend
        self.gpu = config.gpu
        self.work_root = config.work_root
        self.llm_judge = config.llm_judge
        # The format and static layers' processes, started on first use when the lane has its own.
        self.screens = config.screens or ScreenPool()
        self._owns_screens = config.screens is None
        make_undumpable()  # the server's pipes and memory stay out of reach of same-user processes (jail/privileges.py)
        for shared in shared_writable(config.backend):
            if Path(config.work_root).resolve().is_relative_to(Path(shared).resolve()):
                raise ValueError(f"a {config.backend} lane's work root cannot be under {shared}, which its jailed "
                                 f"candidates may write (other evaluations' folders live in the work root)")
        self.gate = TimingGate()
        self.freezer = Freezer()
        budget = config.gpu_memory_bytes - config.judges * CONTEXT_BYTES * 3 if config.gpu_memory_bytes else 1 << 62
        self.memory = MemoryBudget(budget)
        # Beyond the budget, what the device has free when each evaluation starts; the margin is a context being
        # made meanwhile (an executor or a judge starting) and the allocators' rounding.
        read = device_memory_reader(config.gpu or 0) if config.backend == "cuda" else None
        if config.backend == "cuda" and read is None:
            log.warning("GPU %s's free memory cannot be read (no NVML): evaluations start on the lane's budget alone, "
                        "and beside other processes on the GPU they may run out of memory", config.gpu)
        self.free_memory = FreeMemory(read, CONTEXT_BYTES, FREE_MEMORY_WAIT_S)
        self.ipc_min_bytes: int | None = IPC_MIN_BYTES if config.backend == "cuda" else None
        self.zygote = Zygote(config.backend, config.gpu, config.work_root).start()
        threads = 1 if config.backend == "interpreter" else CUDA_CHILD_THREADS
        self._candidate_spec = ChildSpec(CANDIDATE, config.backend, config.gpu, config.work_root, cpu_threads=threads)
        self._trusted_builds = config.work_root / "trusted-builds"
        self.judges_per_task = judges_per_task()
        self.judges = [
            ServiceProcess(f"judge {i}", functools.partial(self._spawn_judge, i, threads),
                           memory_limit_mb=JUDGE_MEMORY_LIMIT_MB, paused=self.freezer.frozen_seconds)
            for i in range(max(1, config.judges))
        ]
        self.builder = None
        if config.backend == "cuda":
            self.builder = ServiceProcess("builder", lambda: self.zygote.spawn(
                ChildSpec(BUILDER, config.backend, config.gpu, config.work_root),
                env_extra={"TRITONRL_TRUSTED_BUILDS": str(self._trusted_builds)}))
        self.problem_sizes: dict[str, tuple[int, int]] = {}  # task key -> (input, output) bytes per trial
        # (task key, warm-up runs, timed runs) -> the timed batch with nothing run (evaluation._time)
        self.empty_batch_s: dict[tuple[str, int, int], float] = {}
        # (task key, method, warm-up runs, timed runs, fresh inputs) -> the reference's quickest figure
        # (evaluation.JudgeLink.time_reference)
        self.reference_times: dict[tuple, TimingStats] = {}
        self.reference_sizes: dict[str, tuple[int, int]] = {}  # reference_key -> the same, measured by a validation
        self._builds: dict[str, Future] = {}
        self._builds_lock = threading.Lock()
        if config.design not in (EXECUTOR_DESIGN, IN_PROCESS_DESIGN):
            raise ValueError(f"unknown sandbox design {config.design!r}: {EXECUTOR_DESIGN} or {IN_PROCESS_DESIGN}")
        self.executor_design = config.design == EXECUTOR_DESIGN
        # Trial seeds no candidate can work out (harness.trial_seeds); the in-process design derives them from
        # the evaluation seed alone, as its candidate process makes the inputs itself.
        self.trial_key = secrets.token_hex(16) if self.executor_design else ""
        self.device_properties = _device_properties(config.backend, config.gpu)
        if self.executor_design and config.backend == "cuda" and reaches_pageable_host_memory(config.gpu or 0):
            log.warning("GPU %s can address pageable host memory (HMM or ATS): candidate kernels can read and write "
                        "the executor's whole process, so the timing checks' kept copies are within their reach "
                        "(docs/security.md); run evaluations where this is off (e.g. uvm_disable_hmm=1)", config.gpu)
        self.executors = None
        # Processes kept ready ahead of demand that hold a CUDA context are started only while the GPU has room
        # for one, and closed while an evaluation waits for memory (relieve_memory).
        def room_for_context() -> bool:
            return self.free_memory.has_room(CONTEXT_BYTES)

        if self.executor_design:
            # The candidate's own processes never make a CUDA context: any number may start at once.
            self.candidates = CandidatePool(lambda: self.spawn(TRACER), config.warm, max(1, config.warm))
            self.executors = CandidatePool(lambda: self.spawn(EXECUTOR), config.warm, config.starting,
                                           reusable=config.backend == "cuda", spare_ok=room_for_context)
            self._context_pool = self.executors
        else:
            self.candidates = CandidatePool(lambda: self.spawn(CANDIDATE), config.warm, config.starting,
                                            spare_ok=room_for_context)
            self._context_pool = self.candidates
        self._judges_trimmed = float("-inf")
        self.free_memory.relieve = self.relieve_memory

    @classmethod
    def create(cls, backend: str, gpu: int | None, warm: int, work_root: Path, llm_judge: LLMJudge | None = None,
               judges: int | None = None, gpu_memory_fraction: float = 0.9, design: str | None = None,
               screens: ScreenPool | None = None) -> Lane:
        """A lane whose GPU memory budget is `gpu_memory_fraction` of the device, or what is free now if less
        (a trainer on the same GPU holds its share); no budget on the interpreter."""
        memory = 0
        if backend == "cuda":
            import torch

            free, total = torch.cuda.mem_get_info(gpu or 0)
            memory = int(min(free, total * gpu_memory_fraction))
        starting = int(os.environ.get(CONTEXT_STARTS_ENV) or CONTEXT_STARTS)
        return cls(LaneConfig(backend, gpu, Path(work_root), warm=warm, starting=starting,
                              judges=judges or (8 if backend == "cuda" else 1), gpu_memory_bytes=memory,
                              llm_judge=llm_judge, design=design or os.environ.get(DESIGN_ENV) or EXECUTOR_DESIGN,
                              screens=screens))

    # -- processes -----------------------------------------------------------------------------
    def _spawn_judge(self, index: int, threads: int) -> Child:
        """Judge `index`'s process, frozen like the untrusted ones while an evaluation that is not its own is timed
        (gpu_alone)."""
        config = self.config
        child = self.zygote.spawn(ChildSpec(JUDGE, config.backend, config.gpu, config.work_root, cpu_threads=threads),
                                  on_close=self.freezer.unregister)
        self.freezer.register(child, owner=self.judges[index])
        return child

    @contextlib.contextmanager
    def gpu_alone(self, keep: Child | None, judge: ServiceProcess | None = None, drain: bool = False) -> Iterator[None]:
        """The GPU to `keep` and `judge` alone, for a timing: other timings wait, no judge's turn starts, and every
        other process of the lane that can reach the GPU (untrusted processes, the other judges, a turn in flight
        included) is frozen. `judge`'s lock is held throughout, so that it works for the timing only (the caller
        asks it with `JudgeLink`'s ungated calls); it is taken before the gate, so that the wait for its turn in
        flight, if any, keeps no other judge's turn out (on an H100 the gate was held or waited for most of
        the wall, 30 ms of waiting a timing for a 15 ms hold, when it was taken after). `drain`: the judges' turns
        in flight end first (TimingGate.exclusive), for a hold that measures a figure kept for later candidates."""
        with (judge.lock if judge is not None else contextlib.nullcontext()), self.gate.exclusive(drain), \
                self.freezer.others_frozen(keep=keep, keep_owner=judge):
            yield

    def spawn(self, role: str) -> Child:
        """A fresh jailed process (candidate, tracer, executor, validator or inductor), frozen whenever another
        one is timed: from the fork on, or, for a CUDA executor, once it has made its CUDA context (driver work
        that need not stop while another process is timed) and before it launches a kernel
        (child_main._warm_up). A tracer has no GPU, but it runs the candidate's Python: left running, the
        tracers' CPU would slow the timed runs' launches (measured on an H100: RL-sized candidates' times
        1.27x the in-process design's, whose other candidates were all frozen), and a candidate could do so
        on purpose."""
        spec = self._candidate_spec if role == CANDIDATE else dataclasses.replace(self._candidate_spec, role=role)
        child = self.zygote.spawn(spec, on_close=self.freezer.unregister)
        if role not in (CANDIDATE, EXECUTOR) or self.backend != "cuda":
            self.freezer.register(child)
            return child
        try:
            wait_ready(child, READY_TIMEOUT_S, stage="context")
            self.freezer.register(child)
            child.send({"type": "warm"})
        except ChildStartError:
            child.close()
            raise
        except OSError as exc:  # it died after `context`: a broken pipe
            error = ChildStartError(f"an executor died after making its CUDA context ({exc}; "
                                    f"{child.describe_exit()}): {child.output()[-1500:]}")
            child.close()
            raise error from None
        return child

    @contextlib.contextmanager
    def reference_process(self, role: str, reference_sources: Sequence[str], memory_limit_mb: int
                          ) -> Iterator[tuple[Child, list[Path], Callable[..., float]]]:
        """A fresh `role` process (validator, inductor) for jobs on references that may be unknown, with each
        reference written to its job folder (their paths are yielded), its memory watched, killed before its
        GPU memory is given back. Also yields `hold(estimate_bytes, cancelled)`: before a reference touches
        the GPU the process estimates what it needs (worker/sizing.py) and the conversation holds that much of
        the budget in place of what it held for the previous reference (half the budget when the estimate is
        None: a full-size KernelBench problem can need tens of GB); it returns the seconds spent waiting for
        the memory. ChildStartError when the process cannot start."""
        child = None
        held = contextlib.ExitStack()  # the current reference's needs

        def hold(estimate_bytes: int | None, cancelled: Callable[[], bool] = lambda: False) -> float:
            held.close()  # the process asks for the next reference's memory after freeing the previous one's
            return held.enter_context(self.memory.reserve(self.reference_bytes(estimate_bytes), cancelled))

        # the process's CUDA context is held for its whole life
        with self.memory.reserve(CONTEXT_BYTES if self.backend == "cuda" else 0):
            try:
                child = self.spawn(role)
                # in its own folder: a jailed process reads no other evaluation's files (jail/landlock.py)
                paths = [child.private_dir / f"reference_{index}.py" for index in range(len(reference_sources))]
                for path, source in zip(paths, reference_sources):
                    path.write_text(source)
                wait_ready(child, READY_TIMEOUT_S)
                child.watch_memory(memory_limit_mb)
                yield child, paths, hold
                child.kill()
            finally:
                if child is not None:
                    child.close()  # before its memory is given back
                held.close()

    def reference_bytes(self, estimate_bytes: int | None) -> int:
        """GPU memory to hold for one reference, beside its process's context: the estimate with room to
        spare (at most half the budget), or half the budget when there is no estimate."""
        if self.backend != "cuda":
            return 0
        half = self.memory.total // 2
        return half if estimate_bytes is None else min(half, estimate_bytes + estimate_bytes // 2)

    def relieve_memory(self) -> None:
        """Give back what the lane's idle processes hold on the GPU while an evaluation waits for memory: it never
        comes free otherwise (on an H100 running full-size level 1, 32 idle executors held 19 GB and the judges
        14 GB, and the largest tasks waited for them). The processes kept ready ahead of demand are closed, and
        the judges not busy drop their kept expected outputs and allocator caches (Judge.trim)."""
        shed = self._context_pool.shed_idle()
        trimmed = 0
        now = time.monotonic()
        if now - self._judges_trimmed >= JUDGE_TRIM_INTERVAL_S:
            # A trim is the judges' GPU work (freed memory goes back to the driver, which clears it) and, like all
            # of it, shares the GPU: never while an evaluation is timed (put off to a later poll, red team 12).
            with self.gate.shared_if_free() as free:
                if free:
                    self._judges_trimmed = now
                    for judge in self.judges:
                        try:
                            trimmed += judge.request_if_idle({"op": "trim"}, JUDGE_TRIM_TIMEOUT_S) is not None
                        except ServiceFailure as exc:  # started again, with empty caches, for its next request
                            log.warning("the %s could not give back its GPU memory: %s", judge.name, exc)
        if shed or trimmed:
            log.info("GPU memory wanted: closed %d idle process(es) holding a CUDA context, %d judge(s) gave back "
                     "their caches", shed, trimmed)

    def judge_for(self, key: str) -> ServiceProcess:
        """A judge that keeps this problem's cache: one of JUDGES_PER_TASK chosen by the task's key (the first
        idle one, else the first), so that a batch of one task's candidates does not queue behind one judge
        while the others idle. Each keeps its own cache of the task."""
        digest = int(hashlib.sha256(key.encode()).hexdigest()[:8], 16)
        count = len(self.judges)
        chosen = [self.judges[(digest + i * (1 + digest % max(1, count - 1))) % count]
                  for i in range(min(self.judges_per_task, count))]
        return next((judge for judge in chosen if not judge.lock.locked()), chosen[0])

    def build(self, request: dict) -> dict:
        """The trusted builder's answer for a candidate's C module: `built` (path, sha256), `refused` (a request
        no honest Triton makes) or `failed` (it did not compile); ServiceFailure when the builder itself failed.
        A jailed candidate cannot build for itself. Identical requests arriving together share one compilation.
        """
        if self.builder is None:
            raise ServiceFailure("this lane has no trusted builder")
        fields = {k: request.get(k) for k in ("name", "source", "library_dirs", "include_dirs", "libraries")}
        key = hashlib.sha256(repr(sorted(fields.items())).encode()).hexdigest()
        with self._builds_lock:
            future = self._builds.get(key)
            owner = future is None
            if owner:
                future = self._builds[key] = Future()
        if not owner:
            return future.result()
        answer: dict | BaseException = ServiceFailure("no answer")
        try:
            with self.builder.lock:
                answer = self.builder.request({"op": "build", **fields}, BUILD_TIMEOUT_S)
            return answer
        except ServiceFailure as exc:
            answer = exc
            raise
        finally:
            if isinstance(answer, BaseException):
                future.set_exception(answer)
            else:
                future.set_result(answer)
            if not (isinstance(answer, dict) and answer.get("type") == "built"):
                with self._builds_lock:
                    self._builds.pop(key, None)

    def ptxas(self, request: dict) -> dict:
        """The trusted builder's cubin (hex) for a candidate's PTX, or why not (see Builder.ptxas)."""
        if self.builder is None:
            raise ServiceFailure("this lane has no trusted builder")
        fields = {k: request.get(k) for k in ("ptx", "capability", "enable_fp_fusion")}
        with self.builder.lock:
            return self.builder.request({"op": "ptxas", **fields}, BUILD_TIMEOUT_S)

    def prepare_bytes(self, key: str, reference: str | None = None) -> int:
        """GPU memory to hold while the judge prepares a task: its estimate once known (from an earlier
        preparation of the task, or a validation of its reference: a data build validates every reference
        before it verifies a pair of it); a first preparation of an unknown task takes half the budget (a
        full-size KernelBench problem can use tens of GB)."""
        if self.backend != "cuda":
            return 0
        sizes = self.problem_sizes.get(key) or self.reference_sizes.get(reference or "")
        return self.memory.total // 2 if sizes is None else self.estimate_bytes(*sizes)

    def estimate_bytes(self, input_bytes: int, output_bytes: int) -> int:
        """GPU memory one evaluation may hold at once: the candidate's context, its pristine and working inputs
        and the allocator's cache of an earlier trial's, its outputs and temporaries, and the judge's inputs
        and expected outputs for the trial it compares (measured: 28.6 GB in the candidate for L1/47's 6.4 GB
        of inputs per trial)."""
        if self.backend != "cuda":
            return 0
        return CONTEXT_BYTES + 5 * input_bytes + 3 * output_bytes

    def minimum_bytes(self, input_bytes: int, output_bytes: int) -> int:
        """GPU memory any evaluation of the task needs at least: the candidate's context, its pristine and working
        inputs and its outputs, the judge's inputs and expected outputs (what `estimate_bytes` adds is the
        allocator's cache and temporaries, which a candidate may not need)."""
        if self.backend != "cuda":
            return 0
        return CONTEXT_BYTES + 3 * input_bytes + 2 * output_bytes

    def close(self) -> None:
        self.candidates.close()
        if self.executors is not None:
            self.executors.close()
        for judge in self.judges:
            judge.close()
        if self.builder is not None:
            self.builder.close()
        self.zygote.close()
        if self._owns_screens:
            self.screens.close()
