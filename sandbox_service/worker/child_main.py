"""Entry point of a child process: `python -m sandbox_service.worker.child_main ROLE BACKEND CTRL_FD REPORT_FD`.

It pays every first-use cost ahead of need (imports, CUDA context, Triton's and cuBLAS's set-up; see
harness.warm_up) so that a warm child starts work at once, tells the server it is ready, waits for exactly one job, applies the job's resource limits, and runs it. The nonce arrives
with the job, before any untrusted code, and stays in a closure here.
"""

from __future__ import annotations

import os
import resource
import sys

from sandbox_service.worker import protocol


def _limit(which: int, value: int) -> None:
    soft, hard = resource.getrlimit(which)
    value = value if hard == resource.RLIM_INFINITY else min(value, hard)
    resource.setrlimit(which, (value, hard if hard != resource.RLIM_INFINITY else value))


def _apply_limits(job: dict) -> None:
    _limit(resource.RLIMIT_CORE, 0)
    _limit(resource.RLIMIT_CPU, int(job["cpu_limit_s"]))
    _limit(resource.RLIMIT_FSIZE, int(job["file_limit_mb"]) * 1024 * 1024)
    if job["backend"] == "interpreter":  # CUDA reserves huge address ranges; the server watches RSS instead
        _limit(resource.RLIMIT_AS, int(job["memory_limit_mb"]) * 1024 * 1024)


def _channel(report_fd: int, nonce: str):
    def emit(kind: str, **fields) -> None:
        protocol.send(report_fd, {**fields, "type": kind, "nonce": nonce})

    return emit


def main(argv: list[str]) -> int:
    role, backend, ctrl_fd, report_fd = argv[1], argv[2], int(argv[3]), int(argv[4])
    _limit(resource.RLIMIT_CORE, 0)
    from sandbox_service.worker.harness import warm_up

    warm_up(backend)
    if role == "candidate":
        from sandbox_service.worker import candidate_runner as runner
    else:
        from sandbox_service.worker import reference_runner as runner
    protocol.send(report_fd, {"type": "ready", "pid": os.getpid()})

    control = protocol.Receiver(ctrl_fd)
    try:
        job = control.receive()
    except protocol.ChannelClosed:
        return 0
    emit = _channel(report_fd, job.pop("nonce"))
    _apply_limits(job)
    try:
        runner.run(job, emit, control)
    except protocol.ChannelClosed:
        return 0
    except BaseException as exc:  # noqa: BLE001 - report, then exit non-zero
        from sandbox_service.worker import harness

        emit("internal_error", error=harness.format_exception(exc))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
