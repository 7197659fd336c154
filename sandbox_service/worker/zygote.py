"""The server's handle on a template process (`zygote_main.py`): fork children from it, learn how they end.

One template per lane. It is started once (a Python start and a torch import: seconds), then every child
costs a fork. If the template dies it is started again on the next request; children it had already
forked keep running and are killed through their process groups as usual.
"""

from __future__ import annotations

import itertools
import json
import logging
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

from sandbox_service.worker.process import (
    BoundedOutput, Child, ChildSpec, ExitWatch, base_environment, drain_into, make_private_dir,
)
from sandbox_service.worker.zygote_main import PROFILE_ENV

log = logging.getLogger(__name__)

TEMPLATE_READY_TIMEOUT_S = 300.0
SPAWN_TIMEOUT_S = 60.0


class ChildStartError(RuntimeError):
    """A child could not be started (an infrastructure failure, not the candidate's); says why."""


class Zygote:
    """Forks children of one backend and GPU from a pre-imported template process."""

    def __init__(self, backend: str, gpu: int | None, work_root: Path):
        self.backend = backend
        self.gpu = gpu
        self.work_root = work_root
        self._lock = threading.Lock()  # one spawn request on the socket at a time
        self._ids = itertools.count()
        self._pending: dict[int, tuple[threading.Event, dict]] = {}
        self._exits: dict[int, ExitWatch] = {}
        self._exits_lock = threading.Lock()
        self._closed = False
        self._sock: socket.socket | None = None
        self._popen: subprocess.Popen | None = None
        self._ready = threading.Event()
        self._template_output = BoundedOutput(64 * 1024)
        self._template_dir = make_private_dir("template", work_root)
        self.warnings: list[str] = []

    # -- the template process ----------------------------------------------------------------
    def _start(self) -> None:
        server_end, template_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        out_read, out_write = os.pipe()
        env = base_environment(self.backend, self.gpu, self._template_dir, cpu_threads=1)
        if os.environ.get(PROFILE_ENV):  # diagnostics only; the children's own environments never carry it
            env[PROFILE_ENV] = os.environ[PROFILE_ENV]
        try:
            self._popen = subprocess.Popen(
                [sys.executable, "-P", "-m", "sandbox_service.worker.zygote_main", self.backend, str(template_end.fileno())],
                stdin=subprocess.DEVNULL, stdout=out_write, stderr=out_write, cwd=self._template_dir, env=env,
                pass_fds=(template_end.fileno(),), start_new_session=True, close_fds=True,
            )
        finally:
            template_end.close()
            os.close(out_write)
        drain_into(out_read, self._template_output)
        self._sock = server_end
        self._ready.clear()
        threading.Thread(target=self._listen, args=(server_end, self._popen), name="zygote-listener", daemon=True).start()

    def _listen(self, sock: socket.socket, popen: subprocess.Popen) -> None:
        while True:
            try:
                data = sock.recv(1 << 16)
            except OSError:
                data = b""
            if not data:
                break
            message = json.loads(data)
            kind = message.get("type")
            if kind == "ready":
                self.warnings = list(message.get("warnings") or [])
                self._ready.set()
            elif kind in ("spawned", "spawn_failed"):
                waiter = self._pending.get(message.get("id"))
                if waiter is not None:
                    waiter[1].update(message)
                    waiter[0].set()
            elif kind == "exit":
                self._exit_watch(int(message["pid"])).set(int(message["returncode"]))
        # The template is gone: wake every waiter; children it forked report no status any more.
        for event, reply in list(self._pending.values()):
            reply.setdefault("type", "spawn_failed")
            reply.setdefault("error", "the template process exited")
            event.set()
        try:
            popen.wait(timeout=5)
        except subprocess.TimeoutExpired:
            popen.kill()
        if not self._closed:
            log.error("the %s template process exited (%s): %s", self.backend, popen.returncode,
                      self._template_output.text()[-2000:])

    def _exit_watch(self, pid: int) -> ExitWatch:
        with self._exits_lock:
            return self._exits.setdefault(pid, ExitWatch())

    def _ensure_running(self) -> None:
        if self._popen is None or self._popen.poll() is not None:
            if self._popen is not None:
                log.warning("restarting the %s template process", self.backend)
            self._start()
        if not self._ready.wait(TEMPLATE_READY_TIMEOUT_S):
            raise ChildStartError(
                f"the {self.backend} template process did not start within {TEMPLATE_READY_TIMEOUT_S:.0f} s "
                f"(overloaded machine?): {self._template_output.text()[-1500:]}"
            )

    def start(self) -> Zygote:
        """Start the template now (otherwise the first spawn does)."""
        with self._lock:
            self._ensure_running()
        return self

    # -- children ----------------------------------------------------------------------------
    def spawn(self, spec: ChildSpec, env_extra: dict[str, str] | None = None, on_close=None) -> Child:
        """Fork a child for `spec`; it reports `ready` on its channel once it can take a job."""
        private_dir = make_private_dir(spec.role, spec.work_root or self.work_root)
        env = base_environment(spec.backend, spec.gpu, private_dir, spec.cpu_threads)
        env.update(env_extra or {})
        ctrl_read, ctrl_write = os.pipe()
        report_read, report_write = os.pipe()
        out_read, out_write = os.pipe()
        request_id = next(self._ids)
        event, reply = threading.Event(), {}
        self._pending[request_id] = (event, reply)
        request = {"id": request_id, "role": spec.role, "backend": spec.backend, "cwd": str(private_dir), "env": env,
                   "threads": spec.cpu_threads}
        try:
            with self._lock:
                self._ensure_running()
                try:
                    socket.send_fds(self._sock, [json.dumps(request).encode()], [ctrl_read, report_write, out_write])
                except OSError as exc:
                    raise ChildStartError(f"could not reach the template process: {exc}") from exc
            if not event.wait(SPAWN_TIMEOUT_S):
                raise ChildStartError(f"the template process did not fork a child within {SPAWN_TIMEOUT_S:.0f} s")
        except BaseException:
            for fd in (ctrl_write, report_read, out_read):
                os.close(fd)
            raise
        finally:
            self._pending.pop(request_id, None)
            for fd in (ctrl_read, report_write, out_write):
                os.close(fd)
        if reply.get("type") != "spawned":
            for fd in (ctrl_write, report_read, out_read):
                os.close(fd)
            raise ChildStartError(f"could not start a {spec.role} process: {reply.get('error', 'unknown error')}")
        output = BoundedOutput(spec.output_limit_bytes)
        drain_into(out_read, output)
        pid = int(reply["pid"])
        return Child(spec, pid, ctrl_write, report_read, output, private_dir, self._exit_watch(pid),
                     on_close=lambda child: self._forget(child.pid, on_close, child))

    def _forget(self, pid: int, on_close, child: Child) -> None:
        with self._exits_lock:
            self._exits.pop(pid, None)
        if on_close is not None:
            on_close(child)

    def close(self) -> None:
        self._closed = True
        if self._sock is not None:
            try:
                self._sock.shutdown(socket.SHUT_RDWR)  # the template exits at end of file on its socket
                self._sock.close()
            except OSError:
                pass
        if self._popen is not None:
            try:
                self._popen.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._popen.kill()
                self._popen.wait()
        import shutil

        shutil.rmtree(self._template_dir, ignore_errors=True)


def wait_ready(child: Child, timeout_s: float, stage: str = "ready") -> None:
    """Block until the child's `stage` message (`ready`, or a CUDA candidate's `context` before it);
    ChildStartError (naming the cause) otherwise."""
    from sandbox_service.worker.protocol import ChannelClosed, ProtocolError

    try:
        message = child.receive(timeout=timeout_s)
    except TimeoutError:
        raise ChildStartError(
            f"a {child.spec.role} process did not reach {stage!r} within {timeout_s:.0f} s (overloaded machine?)"
        ) from None
    except (ChannelClosed, ProtocolError) as exc:
        raise ChildStartError(
            f"a {child.spec.role} process failed to start ({exc}; {child.describe_exit()}): {child.output()[-1500:]}"
        ) from None
    if message.get("type") != stage:
        raise ChildStartError(f"a {child.spec.role} process sent {message.get('type')!r} before {stage!r}")
    if stage == "ready":
        child.ready_after_s = time.monotonic() - child.started_at
