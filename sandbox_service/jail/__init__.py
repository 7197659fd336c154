"""The jail: what confines every untrusted process, applied by trusted code before untrusted code runs.

Two steps, both in the forked child (docs/security.md has the argument):
- `confine_files(writable)` right after the fork, while the process has one thread: Landlock (read
  everywhere, write only its own folder and the GPU's device files) and, for a process started by root,
  no capabilities at all. Every one-shot role gets it (candidate, validator, Inductor compilation).
- `seal(writable, report)` in a candidate just before its job, after its CUDA context exists: the seccomp
  filter (no new processes, no exec, no other process reachable, no network) on every thread, and the
  tripwire that reports escape attempts Python code makes.

What this kernel supports is in `support()`; a missing piece is a warning the lane logs and reports, never
a silent gap.
"""

from __future__ import annotations

import dataclasses
import os
import signal
from collections.abc import Iterable

from sandbox_service.jail import landlock, privileges, seccomp, tripwire

UNTRUSTED_ROLES = frozenset({"candidate", "tracer", "executor", "validator", "inductor"})
# Jailed roles that never touch the GPU: the candidate's own Python traces its forward without CUDA.
GPU_FREE_ROLES = frozenset({"tracer"})
# What a child killed by the seccomp filter dies of; the server reads it as an escape attempt.
DENIED_SYSCALL_SIGNAL = signal.SIGSYS

# The rules of the jail layer (violations with layer "jail"); each is an escape attempt, so `cheat`.
JAIL_RULES = {
    "jail-denied-syscall": "killed by the kernel for a system call the jail denies (a new process, exec, "
                           "ptrace, a signal to another process, a socket, System V IPC...)",
    "jail-process-start": "tried to start a process",
    "jail-write-outside": "tried to write outside its own folder",
    "jail-signal": "tried to signal another process",
    "jail-network": "tried to use the network",
    "jail-escape-attempt": "reported an escape attempt under a rule the server does not know",
}


@dataclasses.dataclass(frozen=True)
class JailSupport:
    """What the jail can enforce on this machine."""

    landlock_abi: int
    seccomp: bool
    root: bool

    def warnings(self) -> list[str]:
        found = []
        if self.landlock_abi < 1:
            found.append("jail: this kernel has no Landlock, so untrusted processes can write wherever the "
                         "server's user can (run the sandbox on Linux 5.13+ with Landlock enabled)")
        if not self.seccomp:
            found.append("jail: no seccomp filter on this architecture, so untrusted processes can start "
                         "processes and signal others")
        return found


# torch's CUDA IPC export (the hand-over of large outputs) creates its reference counter with shm_open, so a
# CUDA process must be able to create files in /dev/shm. No trusted process reads anything there but the
# reference counters a hand-over names, and the work root never lives there on a CUDA lane (scheduler.py).
SHARED_MEMORY = "/dev/shm"


def shared_writable(backend: str) -> list[str]:
    """Folders an untrusted process of `backend` may write besides its own."""
    return [SHARED_MEMORY] if backend == "cuda" and os.path.isdir(SHARED_MEMORY) else []


def writable_folders(own: str, backend: str, diagnostics: str | None = None, gpu: bool = True) -> list[str]:
    """Everything an untrusted process may write: its own folder, what its backend needs shared (for a
    process that uses the GPU), and a diagnostics folder when one is set. Landlock (at the fork) and the
    tripwire (at the seal) take the same."""
    return [own, *(shared_writable(backend) if gpu else []), *([diagnostics] if diagnostics else [])]


def support() -> JailSupport:
    return JailSupport(landlock.abi_version(), seccomp.supported(), os.geteuid() == 0)


def confine_files(writable: Iterable[str], gpu: bool = True) -> list[str]:
    """The file-system half, in a fresh single-threaded child (`gpu`: may it open the GPU). Returns what
    could not be applied."""
    problems = []
    try:
        landlock.restrict(list(writable), gpu=gpu)
    except OSError as exc:
        problems.append(f"landlock: {exc}")
    if os.geteuid() == 0:
        privileges.drop_capabilities()  # never optional: root with capabilities reaches every process
    return problems


def seal(writable: Iterable[str], report: tripwire.Report) -> None:
    """The process half, just before untrusted code runs. The filter is installed when the architecture has
    one; OSError if the kernel refuses it (the child then fails before the candidate runs)."""
    tripwire.arm(writable, report)
    if seccomp.supported():
        seccomp.install()
