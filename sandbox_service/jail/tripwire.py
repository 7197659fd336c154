"""The tripwire: an escape attempt that Python code makes is refused and reported as it happens.

The kernel enforces the jail (seccomp kills the process, Landlock refuses the write), but a refusal alone
reads as the candidate's own failure. A Python audit hook in the jailed process sees the attempt first:
it reports it on the verdict channel (the server makes the evaluation `cheat` with the rule named here)
and raises PermissionError. The hook is untrusted evidence, and it may only ever hurt the candidate: one
that removes or fools it (through ctypes, say) is still stopped by the kernel, and a forged report only
fails its own evaluation.
"""

from __future__ import annotations

import os
import socket
import sys
from collections.abc import Callable, Iterable

PROCESS_EVENTS = frozenset({"os.fork", "os.forkpty", "os.posix_spawn", "os.spawn", "os.exec", "os.system",
                            "subprocess.Popen", "pty.spawn"})
PATH_EVENTS = frozenset({"os.remove", "os.rename", "os.rmdir", "os.mkdir", "os.symlink", "os.link", "os.chmod",
                         "os.chown", "os.truncate", "os.utime", "os.mkfifo", "os.mknod", "shutil.rmtree",
                         "shutil.copyfile", "shutil.move"})
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND

Report = Callable[[str, str], None]


# The arguments each path event changes: a copy's or a symbolic link's source is only read (or only text).
_DESTINATION_ONLY = frozenset({"shutil.copyfile", "os.symlink"})


def _written(event: str, args: tuple) -> tuple:
    if event in _DESTINATION_ONLY:
        return args[1:2]
    if event in ("os.rename", "os.link", "shutil.move"):
        return args[:2]
    return args[:1]


class EscapeAttempt(PermissionError):
    """Raised into the candidate's code where it tried to leave the jail."""


def _is_write_open(mode, flags) -> bool:
    if isinstance(flags, int) and flags & _WRITE_FLAGS:
        return True
    return isinstance(mode, str) and any(c in mode for c in "wax+")


class Tripwire:
    """Decides which audit events are escape attempts, given what the process may write."""

    def __init__(self, writable: Iterable[str], report: Report, pid: int | None = None):
        self.writable = tuple(os.path.realpath(path) for path in writable)
        self.report = report
        self.pid = os.getpid() if pid is None else pid
        self.tripped: list[tuple[str, str]] = []

    def allowed_path(self, path) -> bool:
        if isinstance(path, int):
            return True  # an open descriptor: whatever it is, the kernel already let the process have it
        if isinstance(path, bytes):
            path = os.fsdecode(path)
        if not isinstance(path, str):
            path = os.fspath(path)
        real = os.path.realpath(path)
        if real == os.devnull:
            return True
        return any(real == root or real.startswith(root + os.sep) for root in self.writable)

    def classify(self, event: str, args: tuple) -> tuple[str, str] | None:
        """(rule, message) when the event is an escape attempt."""
        if event in PROCESS_EVENTS:
            return "jail-process-start", f"tried to start a process ({event})"
        if event == "open" and len(args) >= 3 and _is_write_open(args[1], args[2]) and not self.allowed_path(args[0]):
            return "jail-write-outside", f"tried to open {args[0]!r} for writing outside its folder"
        if event in PATH_EVENTS:
            for path in _written(event, args):
                if isinstance(path, (str, bytes, os.PathLike)) and not self.allowed_path(path):
                    return "jail-write-outside", f"tried {event} on {path!r} outside its folder"
        if event in ("os.kill", "os.killpg") and args and args[0] not in (self.pid, 0):
            return "jail-signal", f"tried to signal process {args[0]} ({event})"
        if event == "socket.__new__" and len(args) >= 2 and args[1] not in (-1, socket.AF_UNIX):
            return "jail-network", f"tried to open a network socket (family {args[1]})"
        if event in ("socket.connect", "socket.bind", "socket.sendto") and len(args) >= 2 and not isinstance(args[1], (str, bytes)):
            return "jail-network", f"tried {event} to {args[1]!r}"
        return None

    def __call__(self, event: str, args: tuple) -> None:
        found = self.classify(event, args)
        if found is None:
            return
        if not self.tripped:
            self.report(*found)
        self.tripped.append(found)
        raise EscapeAttempt(f"sandbox: {found[1]}")


def arm(writable: Iterable[str], report: Report) -> Tripwire:
    """Install the tripwire for the rest of this process's life (audit hooks cannot be removed)."""
    tripwire = Tripwire(writable, report)
    sys.addaudithook(tripwire)
    return tripwire
