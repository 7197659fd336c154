"""A screen worker: `python -P -m sandbox_service.verifier.screen_worker SOCKET_FD PARENT_PID [JOB]`.

Trusted code reading untrusted text: the format and static layers (`format.check_format`,
`static_rules.check_static`) on one candidate at a time, for the server's `ScreenPool` (screen_pool.py), so
that their parsing and analysis (about 10 ms of CPU per candidate) neither hold the server's GIL nor wait on
a lock around CPython 3.11's `ast`, which is not thread-safe. Nothing here executes the candidate.

Requests and answers are JSON frames (worker/protocol.py) on the socket the server passed: a request
`{"candidate", "reference", "format", "max_bytes", "policy"}` is answered `format` (`code`, `violations`),
then, when the format layer passed, `static` (`violations`); an exception that escapes a layer is answered
`error` (the server's infra_error, as when the screens ran in its own threads). Every frame also carries
the worker's CPU time so far (`cpu_s`). The worker is undumpable, imports only from absolute paths no
candidate can write to (started with `-P` from `/`, the package root first), and exits when the server
closes the socket or dies.
"""

from __future__ import annotations

import dataclasses
import importlib
import os
import signal
import sys
import threading
import time
from collections.abc import Callable

from sandbox_service.jail import privileges
from sandbox_service.options import CandidateFormat, Policy
from sandbox_service.verifier.format import check_format
from sandbox_service.verifier.static_rules import check_static
from sandbox_service.worker import protocol
from sandbox_service.worker.zygote_main import name_process, trusted_import_path

# The server is trusted: its requests are bounded by the sources it was sent, not by a frame limit.
MAX_REQUEST_BYTES = 1 << 31
PARENT_POLL_S = 0.5

Send = Callable[[dict], None]


def screen(request: dict, send: Send) -> None:
    """The format layer, then (when it passed) the static layer, each answered as soon as it is done."""
    fmt = check_format(request["candidate"], CandidateFormat(request["format"]), int(request["max_bytes"]))
    send({"type": "format", "code": None if fmt.violations else fmt.code,
          "violations": [dataclasses.asdict(v) for v in fmt.violations]})
    if fmt.violations:
        return
    static = check_static(fmt.code, Policy(request["policy"]), request["reference"])
    send({"type": "static", "violations": [dataclasses.asdict(v) for v in static]})


def _job(name: str) -> Callable[[dict, Send], None]:
    """`module:function`, for tests that need a worker that spins or sleeps (the server never passes one)."""
    module, _, function = name.partition(":")
    return getattr(importlib.import_module(module), function)


def _watch_parent(parent: int) -> None:
    """Exit when the server is gone, even in the middle of an analysis (its end of the socket closing is
    noticed only between requests)."""
    while True:
        time.sleep(PARENT_POLL_S)
        if os.getppid() != parent:
            os._exit(0)


def main(argv: list[str]) -> int:
    sock_fd, parent = int(argv[1]), int(argv[2])
    privileges.make_undumpable()  # no process of the same user can open this one's /proc entries (its socket)
    trusted_import_path()
    name_process("trl-screen")
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the server decides when we stop (it closes the socket)
    threading.Thread(target=_watch_parent, args=(parent,), name="parent-watch", daemon=True).start()
    job = _job(argv[3]) if len(argv) > 3 else screen

    def send(message: dict) -> None:
        # with its CPU time so far: the server tells a text that kept it busy from a starved worker
        protocol.send(sock_fd, {**message, "cpu_s": time.process_time()}, max_bytes=MAX_REQUEST_BYTES)

    receiver = protocol.Receiver(sock_fd, max_bytes=MAX_REQUEST_BYTES)
    send({"type": "ready", "pid": os.getpid()})
    while True:
        try:
            request = receiver.receive()
        except (protocol.ChannelClosed, protocol.ProtocolError, OSError):
            return 0
        try:
            job(request, send)
        except (protocol.ProtocolError, OSError):
            return 0  # the server went away (or the answer cannot be framed: the server reports the silence)
        except Exception as exc:  # noqa: BLE001 - a layer's own failure is the sandbox's, reported as such
            send({"type": "error", "error": f"{type(exc).__name__}: {exc}"[:2000]})


if __name__ == "__main__":
    sys.exit(main(sys.argv))
