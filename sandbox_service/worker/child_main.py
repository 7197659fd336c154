"""What a forked child does: get its device ready, say `ready`, then serve its role.

Roles (each in its own fresh process, forked from the template):
- candidate: one evaluation of untrusted code with the harness in its process (`candidate_runner`), then the
  process is killed (the design the executor replaces; docs/security.md);
- tracer: the candidate's Python, without the GPU or any input value: it traces `ModelNew.forward` into a
  launch program (sandbox_service/untrusted/), then the process is killed;
- executor: checks launch programs and replays them on the real inputs (sandbox_service/executor/), one
  evaluation at a time; on a GPU it keeps its CUDA context for many evaluations;
- validator: one validation of a reference against itself (`validator`), then killed;
- inductor: one reference compiled by TorchInductor into a standalone module (`inductor_runner`), then killed;
- judge: long-lived, trusted code only: runs references and compares outputs (`judge`);
- builder: long-lived, trusted: compiles Triton's C launchers into a content-addressed cache (`builder`).

The one-shot roles receive a per-evaluation nonce with their job, before any untrusted code runs; it
stays in a closure here and stamps every message on the verdict channel.
"""

from __future__ import annotations

import gc
import os
import resource
import sys
import time

from sandbox_service.worker import protocol

TEMPLATE_WARMUP_ENV = "TRITONRL_TEMPLATE_WARMUP"


def _limit(which: int, value: int) -> None:
    soft, hard = resource.getrlimit(which)
    value = value if hard == resource.RLIM_INFINITY else min(value, hard)
    resource.setrlimit(which, (value, hard if hard != resource.RLIM_INFINITY else value))


def apply_limits(job: dict) -> None:
    _limit(resource.RLIMIT_CORE, 0)
    _limit(resource.RLIMIT_CPU, int(job["cpu_limit_s"]))
    _limit(resource.RLIMIT_FSIZE, int(job["file_limit_mb"]) * 1024 * 1024)
    if job["backend"] == "interpreter":  # CUDA reserves huge address ranges; the server watches RSS instead
        _limit(resource.RLIMIT_AS, int(job["memory_limit_mb"]) * 1024 * 1024)


def prepare_template(backend: str) -> list[str]:
    """Imports and first-use costs paid once in the template, before any fork. Returns warnings.

    Measured on an H100 a fresh Python spends 8-12 s importing torch, Triton and torch._dynamo (the runtime
    monitor needs it); a forked child inherits all of it. Each step only saves time, so one that fails
    (another Triton version, say) is reported and skipped. `TRITONRL_TEMPLATE_WARMUP=none` skips all.
    """
    from sandbox_service.executor import runner  # noqa: F401 - once, here
    from sandbox_service.untrusted import candidate  # noqa: F401
    from sandbox_service.worker import (  # noqa: F401
        builder, candidate_runner, harness, inductor_runner, judge, validator, warmup,
    )

    return harness.prepare_template(backend, os.environ.get(TEMPLATE_WARMUP_ENV, "all"))


# Messages after which the server may kill a one-shot child at any moment.
_LAST_WORDS = frozenset({"outputs_done", "timing", "compile_error", "runtime_error", "internal_error", "done",
                         "load_error", "refused", "module", "out_of_memory"})


def _channel(report_fd: int, nonce: str, profile: "_Profile | None"):
    def emit(kind: str, **fields) -> None:
        if profile is not None and kind in _LAST_WORDS:
            profile.dump()  # before the message: the server may kill us right after it
        protocol.send(report_fd, {**fields, "type": kind, "nonce": nonce})

    return emit


class _Profile:
    """Diagnostics of one child: a cProfile of its job, and the modules it imported that the template had
    not (each costs every child its import: a candidate for the template's warm-up)."""

    def __init__(self, path_stem: str, inherited_modules: set[str]):
        import cProfile

        self.path_stem = path_stem
        self.inherited = inherited_modules
        self.profiler = cProfile.Profile()
        self.profiler.enable()

    def dump(self) -> None:
        self.profiler.dump_stats(self.path_stem + ".prof")
        with open(self.path_stem + ".modules", "w") as f:
            f.write("\n".join(sorted(set(sys.modules) - self.inherited)))


def _warm_up(control: protocol.Receiver, report_fd: int, device) -> bool:
    """A candidate's first GPU work, once the server can freeze it. Making the CUDA context is driver work
    only, so it goes on while another evaluation is timed (the pool's supply of processes does not stop);
    the warm-up launches kernels, so the process first says `context` and waits for `warm`, which the server
    sends once this process is frozen whenever another one is timed. False if the server closed the channel."""
    from sandbox_service.worker import warmup

    protocol.send(report_fd, {"type": "context", "pid": os.getpid()})
    try:
        order = control.receive()
    except protocol.ChannelClosed:
        return False
    if order.get("type") != "warm":
        raise protocol.ProtocolError(f"expected warm, got {order.get('type')!r}")
    warmup.load_harness_kernels(device)
    return True


def _seal(backend: str, report, diagnostics: str | None, gpu: bool) -> None:
    """Last trusted step before untrusted code runs (the candidate's Python, or the first kernel an executor
    replays): the seccomp filter and the tripwire (sandbox_service.jail)."""
    from sandbox_service import jail

    writable = jail.writable_folders(os.getcwd(), backend, diagnostics, gpu)  # job folders lie in its own
    jail.seal(writable, lambda rule, message: report("jail_violation", rule=rule, message=message))


def _remote_ptxas(emit, control: protocol.Receiver):
    def request(ptx: str, arch: str, options: dict) -> dict:
        emit("ptxas_request", ptx=ptx, arch=arch, **options)
        answer = control.receive()
        if answer.get("type") != "ptxas_result":
            raise protocol.ChannelClosed(f"expected ptxas_result, got {answer.get('type')!r}")
        return answer

    return request


def _serve_executor(backend: str, control: protocol.Receiver, report_fd: int, diagnostics: str | None) -> int:
    """Jobs, one at a time, until the server closes the channel (or after any failure inside a job)."""
    from sandbox_service.executor import runner

    sealed = False
    # With `diagnostics`, one profile over all of this executor's jobs, written whenever a job says its last.
    profile = _Profile(os.path.join(diagnostics, f"executor-{os.getpid()}"), set(sys.modules)) if diagnostics else None
    while True:
        try:
            job = control.receive()
        except protocol.ChannelClosed:
            return 0
        emit = _channel(report_fd, job.pop("nonce"), profile)
        runner._Channel.emit = emit
        if not sealed:
            apply_limits({**job, "cpu_limit_s": 1 << 30})  # a long-lived process: the server's deadlines bound it
            runner.install_builders(backend, bool(job.get("remote_build")))
            _seal(backend, lambda kind, **fields: runner._Channel.emit(kind, **fields), diagnostics, gpu=True)
            sealed = True
        try:
            runner.run(job, emit, control)
        except protocol.ChannelClosed:
            return 0
        except BaseException as exc:  # noqa: BLE001 - report, then exit non-zero
            from sandbox_service.worker import harness

            emit("internal_error", error=harness.format_exception(exc))
            return 1
        runner.forget_job()


def settle_heap() -> None:
    """Move every object made so far (torch, Triton, the CUDA context's wrappers: hundreds of thousands) out of
    the collector's sight, for good. A long-lived executor collects after each job so that the job's kernels and
    tensors go (runner.forget_job), and that collection would otherwise walk them all every time (80-110 ms of CPU
    a job on an H100 host; 3-5 ms frozen). The template freezes its own before it forks (the children then also
    leave those pages unwritten); this freezes what the child's start-up added."""
    gc.collect()
    gc.freeze()


def serve(role: str, backend: str, ctrl_fd: int, report_fd: int, threads: int, profile_dir: str | None = None) -> int:
    """The child's whole life; returns its exit code. With `profile_dir`, a one-shot role's job is profiled
    into `profile_dir/ROLE-PID.prof` and `.modules` (_Profile)."""
    _limit(resource.RLIMIT_CORE, 0)
    started = time.monotonic()
    inherited_modules = set(sys.modules) if profile_dir else set()
    from sandbox_service.worker import harness

    harness.set_threads(threads)
    control = protocol.Receiver(ctrl_fd)
    if backend == "cuda" and role != "tracer":  # the tracer (the candidate's Python) never holds the GPU
        harness.init_cuda()
        if role in ("candidate", "executor") and not _warm_up(control, report_fd, harness.device_for(backend)):
            return 0
    settle_heap()
    protocol.send(report_fd, {"type": "ready", "pid": os.getpid(), "init_s": round(time.monotonic() - started, 4)})
    if role == "judge":
        from sandbox_service.worker import judge

        return judge.serve(backend, control, report_fd)
    if role == "builder":
        from sandbox_service.worker import builder

        return builder.serve(control, report_fd)
    if role == "executor":
        return _serve_executor(backend, control, report_fd, profile_dir)
    if role == "tracer":
        from sandbox_service.untrusted import candidate as runner
    elif role == "candidate":
        from sandbox_service.worker import candidate_runner as runner
    elif role == "validator":
        from sandbox_service.worker import validator as runner
    elif role == "inductor":
        from sandbox_service.worker import inductor_runner as runner
    else:
        print(f"unknown role {role!r}", file=sys.stderr)
        return 2
    try:
        job = control.receive()
    except protocol.ChannelClosed:
        return 0
    profile = _Profile(os.path.join(profile_dir, f"{role}-{os.getpid()}"), inherited_modules) if profile_dir else None
    emit = _channel(report_fd, job.pop("nonce"), profile)
    apply_limits(job)
    if role == "candidate":
        if backend == "cuda" and job.get("remote_build"):
            harness.install_remote_ptxas(_remote_ptxas(emit, control))
        _seal(backend, emit, profile_dir, gpu=True)
    elif role == "tracer":
        _seal(backend, emit, profile_dir, gpu=False)
    try:
        runner.run(job, emit, control)
    except protocol.ChannelClosed:
        return 0
    except BaseException as exc:  # noqa: BLE001 - report, then exit non-zero
        emit("internal_error", error=harness.format_exception(exc))
        return 1
    return 0
