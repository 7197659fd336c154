"""The format and static screens, run in a few trusted worker processes instead of the server's threads.

The screens parse and analyse every candidate (about 10 ms of CPU each). In the server they held its GIL,
which its message handling needs, and ran one at a time under a lock (CPython 3.11's `ast` is not
thread-safe). Here each evaluation hands the text to one of `workers` processes (`screen_worker.py`) and
waits for its answers: the format layer's, then the static layer's. A worker is a fresh `python -P`
started from `/` with the package root as its import path, as the template is (subprocess: fork and exec at
once, safe in the multi-threaded server; multiprocessing's spawn would run its own bootstrap with the
server's import path and working folder before any of the worker's code, re-run a server started from a
script file as `__mp_main__`, and leave a resource-tracker process behind). The verdicts are those of
`check_format` and `check_static` themselves; the layers' durations are what the evaluation waited.

Failures, and whose they are:
- a worker that dies while idle, or cannot be sent the request, is replaced and the request goes to the
  new one: nobody's fault;
- a worker that dies while screening is replaced and the request is tried once more on the new one; if
  that one dies too, the text killed two analysers: charged to the candidate, as a timeout is;
- a request that is not answered within `timeout_s` (from when a worker took it) has its worker killed
  and replaced. When that worker was on the CPU for at least CPU_SHARE of the time, the candidate's text
  kept it busy: during the format layer the verdict is `format_error` (`syntax-error`, "does not parse"),
  during the static layer `cheat` (`unanalysable`: the analysis did not finish, as when it exceeds its own
  budgets). A worker that got less CPU than that was starved by an overloaded machine: ScreenFailure;
- a worker that cannot start, an exception that escapes a layer (before, it escaped the evaluation),
  or an answer that is not what the protocol says: ScreenFailure, which the evaluation reports as
  `infra_error`, never the candidate's.
Whatever happens, the pool keeps its `workers` processes: a slot whose process was lost starts a new one
at once, and a request waits for a free slot rather than failing.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import select
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Sequence

from sandbox_service.options import CandidateFormat, EvalOptions, Policy
from sandbox_service.results import Violation
from sandbox_service.worker import protocol
from sandbox_service.worker.process import PACKAGE_ROOT, BoundedOutput, drain_into

log = logging.getLogger(__name__)

SCREEN_WORKERS = 2  # 10 ms a candidate: two processes screen 12,000 candidates a minute
SCREEN_TIMEOUT_S = 20.0  # the slowest screens measured (500 kB sources, 3000-deep call chains) take 0.3 s
CPU_SHARE = 0.5  # of the timeout, on the CPU, for a timeout to be the text's doing and not the machine's
START_TIMEOUT_S = 60.0
CLOSE_WAIT_S = 5.0
WORKER_MODULE = "sandbox_service.verifier.screen_worker"
_INHERITED_ENV = ("LD_LIBRARY_PATH",)


class ScreenFailure(RuntimeError):
    """The screens gave no verdict, through no fault of the candidate's (the evaluation's infra_error)."""


@dataclasses.dataclass(frozen=True)
class Screened:
    """What the format and static layers found: the code later layers run (None when the format layer
    rejected the text), each layer's violations (static: None when it did not run) and its duration."""

    code: str | None
    format_violations: list[Violation]
    format_s: float
    static_violations: list[Violation] | None = None
    static_s: float = 0.0


class _Died(Exception):
    """The worker's process ended (or its socket broke) while it had the request, in `phase`."""

    def __init__(self, cause: str):
        super().__init__(cause)
        self.cause = cause
        self.phase, self.format_code, self.format_s = "format", None, 0.0


class _Worker:
    """One slot of the pool and the process in it (None between a loss and the next start)."""

    def __init__(self, index: int):
        self.index = index
        self.popen: subprocess.Popen | None = None
        self.sock: socket.socket | None = None
        self.receiver: protocol.Receiver | None = None
        self.output = BoundedOutput(16 * 1024)
        self.ready = False
        self.launches = 0
        self.cpu_s: float | None = None  # its CPU time at its last answer (it said so): idle since

    def cpu_seconds(self) -> float | None:
        """User and system CPU time of its process so far (None when /proc does not say): read only after a
        timeout, as the worker says its own with every answer."""
        if self.popen is None:
            return None
        try:
            with open(f"/proc/{self.popen.pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        except (OSError, ValueError, IndexError):
            return None

    def describe(self) -> str:
        code = self.popen.poll() if self.popen is not None else None
        how = "running" if code is None else f"signal {-code}" if code < 0 else f"exit code {code}"
        tail = self.output.text()[-1500:].strip()
        return f"{how}: {tail}" if tail else how


def _cpu(message: dict) -> float | None:
    cpu = message.get("cpu_s")
    return float(cpu) if isinstance(cpu, (int, float)) and not isinstance(cpu, bool) else None


class ScreenPool:
    """`workers` screen processes shared by the threads of a server (or one lane). Processes start on first
    use, or all at once with `start()`; `close()` ends them all."""

    def __init__(self, workers: int = SCREEN_WORKERS, timeout_s: float = SCREEN_TIMEOUT_S,
                 start_timeout_s: float = START_TIMEOUT_S, job: str | None = None, import_path: Sequence[str] = ()):
        """`job` (`module:function`, on `import_path`) replaces the screens in the workers: for tests that need
        a worker that spins or sleeps. The server never passes one."""
        if workers < 1 or timeout_s <= 0:
            raise ValueError("a screen pool needs at least one worker and a positive timeout")
        self.timeout_s = timeout_s
        self.start_timeout_s = start_timeout_s
        self._job = [job] if job else []
        self._import_path = [str(PACKAGE_ROOT), *map(str, import_path)]
        self._workers = [_Worker(i) for i in range(workers)]
        self._idle = list(reversed(self._workers))  # a stack: one thread at a time keeps using one process
        self._cond = threading.Condition()
        self._closed = False
        self.timeouts = 0  # requests that were not answered in time

    # -- processes -------------------------------------------------------------------------------
    def _environment(self) -> dict[str, str]:
        env = {k: os.environ[k] for k in _INHERITED_ENV if k in os.environ}
        env.update(PATH=f"{os.path.dirname(sys.executable)}:/usr/bin:/bin", LANG="C.UTF-8",
                   PYTHONPATH=os.pathsep.join(self._import_path), PYTHONNOUSERSITE="1",
                   PYTHONDONTWRITEBYTECODE="1", PYTHONHASHSEED="0", PYTHONUNBUFFERED="1")
        return env

    def _launch(self, worker: _Worker) -> None:
        """Start the slot's process (not waiting for it to be ready). ScreenFailure when it cannot start."""
        server_end, worker_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        out_read, out_write = os.pipe()
        try:
            popen = subprocess.Popen(
                [sys.executable, "-P", "-m", WORKER_MODULE, str(worker_end.fileno()), str(os.getpid()), *self._job],
                stdin=subprocess.DEVNULL, stdout=out_write, stderr=out_write, cwd="/", env=self._environment(),
                pass_fds=(worker_end.fileno(),), start_new_session=True, close_fds=True,
            )
        except OSError as exc:
            server_end.close()
            os.close(out_read)
            raise ScreenFailure(f"a screen worker could not be started: {exc}") from None
        finally:
            worker_end.close()
            os.close(out_write)
        output = BoundedOutput(16 * 1024)
        drain_into(out_read, output)
        os.set_blocking(server_end.fileno(), False)  # every read and write has a deadline
        with self._cond:
            closed = self._closed
            if not closed:
                worker.popen, worker.sock, worker.output = popen, server_end, output
                worker.ready, worker.cpu_s = False, None
                worker.receiver = protocol.Receiver(server_end.fileno())
                worker.launches += 1
        if closed:
            popen.kill()
            popen.wait()
            server_end.close()
            raise ScreenFailure("the screen pool is closed")

    def _discard(self, worker: _Worker, replace: bool = True) -> None:
        """Kill the slot's process and reap it; start its replacement unless the pool is closing."""
        popen, sock = worker.popen, worker.sock
        worker.popen = worker.sock = worker.receiver = None
        worker.ready = False
        if popen is not None:
            popen.kill()
            try:
                popen.wait(timeout=CLOSE_WAIT_S)
            except subprocess.TimeoutExpired:
                log.error("screen worker %d did not die after SIGKILL", popen.pid)
        if sock is not None:
            sock.close()
        if replace and not self._closed:
            try:
                self._launch(worker)
            except ScreenFailure as exc:
                log.warning("screen worker %d not replaced yet: %s", worker.index, exc)  # tried again on next use

    def _ensure(self, worker: _Worker) -> None:
        """The slot's process, started and ready. ScreenFailure when it cannot be."""
        if worker.popen is not None and worker.popen.poll() is not None:
            log.warning("screen worker %d died while idle (%s); replacing it", worker.index, worker.describe())
            self._discard(worker, replace=False)
        if worker.popen is None:
            self._launch(worker)
        if worker.ready:
            return
        try:
            hello = worker.receiver.receive(timeout=self.start_timeout_s)
        except (TimeoutError, protocol.ChannelClosed, protocol.ProtocolError, OSError) as exc:
            what = worker.describe()
            self._discard(worker, replace=False)
            raise ScreenFailure(f"a screen worker did not start within {self.start_timeout_s:.0f} s ({exc}): "
                                f"{what}") from None
        if hello.get("type") != "ready":
            self._discard(worker, replace=False)
            raise ScreenFailure(f"a screen worker said {hello.get('type')!r} instead of 'ready'")
        worker.ready = True
        worker.cpu_s = _cpu(hello)

    def start(self) -> ScreenPool:
        """Start every worker now (they become ready while the server starts); otherwise the first requests do."""
        for worker in self._workers:
            with self._cond:
                idle = worker in self._idle and worker.popen is None and not self._closed
                if idle:
                    self._idle.remove(worker)
            if idle:
                try:
                    self._launch(worker)
                finally:
                    self._release(worker)
        return self

    @property
    def restarts(self) -> int:
        """Processes started to replace lost ones."""
        return sum(max(0, w.launches - 1) for w in self._workers)

    def pids(self) -> list[int]:
        """The worker processes alive now."""
        return [w.popen.pid for w in self._workers if w.popen is not None and w.popen.poll() is None]

    # -- requests --------------------------------------------------------------------------------
    def _acquire(self) -> _Worker:
        with self._cond:
            while not self._idle and not self._closed:
                self._cond.wait()
            if self._closed:
                raise ScreenFailure("the screen pool is closed")
            return self._idle.pop()

    def _release(self, worker: _Worker) -> None:
        with self._cond:
            self._idle.append(worker)
            self._cond.notify_all()

    def _write(self, worker: _Worker, data: bytes) -> None:
        fd, view = worker.sock.fileno(), memoryview(data)
        deadline = time.monotonic() + self.timeout_s
        while view:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not select.select([], [fd], [], remaining)[1]:
                raise TimeoutError(f"the worker took no request for {self.timeout_s:.0f} s")
            try:
                view = view[os.write(fd, view):]
            except BlockingIOError:
                continue

    def _send(self, worker: _Worker, data: bytes) -> None:
        """Deliver the request to a ready process: one that cannot take it (it died while idle, or is wedged)
        is replaced and the request goes to its replacement, blaming nobody."""
        for attempt in range(2):
            self._ensure(worker)
            try:
                self._write(worker, data)
                return
            except (OSError, TimeoutError) as exc:
                log.warning("screen worker %d could not be sent a request (%s: %s); replacing it", worker.index,
                            type(exc).__name__, worker.describe())
                self._discard(worker, replace=False)
        raise ScreenFailure("no screen worker would take the request")

    def _answer(self, worker: _Worker, deadline: float, expected: str) -> dict:
        try:
            answer = worker.receiver.receive(timeout=max(0.0, deadline - time.monotonic()))
        except TimeoutError:
            raise  # an OSError too, but not a death
        except (protocol.ChannelClosed, OSError) as exc:
            if worker.popen is not None:
                try:
                    worker.popen.wait(timeout=1.0)  # so that describe() can say how it ended
                except subprocess.TimeoutExpired:
                    pass
            raise _Died(f"{exc}; {worker.describe()}") from None
        except protocol.ProtocolError as exc:
            self._discard(worker)
            raise ScreenFailure(f"a screen worker sent a malformed answer: {exc}") from None
        worker.cpu_s = _cpu(answer)
        if answer.get("type") == "error":
            raise ScreenFailure(f"the {expected} screen failed: {answer.get('error', '')}")
        if answer.get("type") != expected:
            self._discard(worker)
            raise ScreenFailure(f"a screen worker answered {answer.get('type')!r} instead of {expected!r}")
        return answer

    def _violations(self, worker: _Worker, answer: dict) -> list[Violation]:
        found = answer.get("violations")
        try:
            if not isinstance(found, list):
                raise TypeError("violations is not a list")
            violations = []
            for item in found:
                if (not isinstance(item, dict) or set(item) != {"layer", "rule", "message", "line"}
                        or not all(isinstance(item[k], str) for k in ("layer", "rule", "message"))
                        or not (item["line"] is None or type(item["line"]) is int)):
                    raise TypeError(f"not a violation: {str(item)[:200]}")
                violations.append(Violation(**item))
            return violations
        except TypeError as exc:
            self._discard(worker)
            raise ScreenFailure(f"a screen worker sent a malformed answer: {exc}") from None

    def screen(self, candidate_source: str, reference_source: str | None, options: EvalOptions) -> Screened:
        """The format and static layers on the text, under `options` (policy, candidate_format,
        max_source_bytes). ScreenFailure when no verdict could be had through no fault of the text."""
        max_bytes = int(options.max_source_bytes)
        # A text of more than max_bytes characters has more than max_bytes bytes: the format layer's first
        # check refuses it whatever follows, so the rest need not travel.
        request = {"type": "screen", "candidate": candidate_source[: max_bytes + 1], "reference": reference_source,
                   "format": CandidateFormat(options.candidate_format).value, "max_bytes": max_bytes,
                   "policy": Policy(options.policy).value}
        data = protocol.frame(request, max_bytes=1 << 62)
        started = time.monotonic()
        deaths: list[str] = []
        while True:
            worker = self._acquire()
            try:
                return self._screen_once(worker, data, started)
            except _Died as died:
                log.warning("screen worker %d died while screening (%s); replacing it", worker.index, died.cause)
                self._discard(worker)
                if self._closed:
                    raise ScreenFailure("the screen pool was closed during the request") from None
                deaths.append(died.cause)
                if len(deaths) == 2:
                    return self._charged(died.phase, started, died.format_code, died.format_s,
                                         f"its process died twice on this text: {died.cause[:300]}")
            finally:
                self._release(worker)

    def _screen_once(self, worker: _Worker, data: bytes, started: float) -> Screened:
        self._send(worker, data)
        worker.receiver.max_bytes = max(protocol.MAX_MESSAGE_BYTES, 8 * len(data))
        cpu_before = worker.cpu_s
        deadline = time.monotonic() + self.timeout_s
        phase, code, format_s = "format", None, 0.0
        try:
            answer = self._answer(worker, deadline, "format")
            format_s = time.monotonic() - started
            violations = self._violations(worker, answer)
            if violations:
                return Screened(None, violations, format_s)
            code = answer.get("code")
            if not isinstance(code, str):
                self._discard(worker)
                raise ScreenFailure("a screen worker passed the format layer without the code")
            phase = "static"
            answer = self._answer(worker, deadline, "static")
            return Screened(code, [], format_s, self._violations(worker, answer),
                            time.monotonic() - started - format_s)
        except TimeoutError:
            now = worker.cpu_seconds()
            cpu = None if cpu_before is None or now is None else now - cpu_before
            self._discard(worker)
            with self._cond:
                self.timeouts += 1
            if cpu is not None and cpu < CPU_SHARE * self.timeout_s:
                raise ScreenFailure(f"the {phase} screen did not finish within {self.timeout_s:g} s, but its worker "
                                    f"had only {cpu:.1f} s of CPU in that time: an overloaded machine") from None
            log.warning("the %s screen did not finish within %g s (%s s of CPU): charged to the candidate", phase,
                        self.timeout_s, "?" if cpu is None else f"{cpu:.1f}")
            return self._charged(phase, started, code, format_s, f"no answer within {self.timeout_s:g} s")
        except _Died as died:
            died.phase, died.format_code, died.format_s = phase, code, format_s
            raise

    @staticmethod
    def _charged(phase: str, started: float, code: str | None, format_s: float, why: str) -> Screened:
        """The verdict on a text that kept a worker busy past the timeout, or killed two: the layer it was in
        fails, as when a parse or an analysis goes past its own limits."""
        if phase == "format":
            message = f"does not parse: the format check did not finish ({why})"
            return Screened(None, [Violation("format", "syntax-error", message)], time.monotonic() - started)
        message = f"the analysis did not finish ({why})"
        return Screened(code, [], format_s, [Violation("static", "unanalysable", message, 0)],
                        time.monotonic() - started - format_s)

    def close(self) -> None:
        """End every worker: the idle ones now, the busy ones killed (their requests fail) and reaped by
        their threads, which are waited for a few seconds."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()
            busy = [w for w in self._workers if w not in self._idle]
        for worker in busy:
            popen = worker.popen
            if popen is not None:
                popen.kill()  # its thread sees the socket close and discards the slot
        deadline = time.monotonic() + CLOSE_WAIT_S
        with self._cond:
            while len(self._idle) < len(self._workers) and time.monotonic() < deadline:
                self._cond.wait(timeout=max(0.0, deadline - time.monotonic()))
            idle = list(self._idle)
        for worker in idle:
            self._discard(worker, replace=False)
