"""Process-level privileges: who may look into a process, and what a root-started process keeps.

- `make_undumpable()` (PR_SET_DUMPABLE 0) in every trusted process and in the template, so every forked
  process inherits it: the kernel then refuses other processes of the same user (without
  CAP_SYS_PTRACE) `/proc/PID/fd`, `/proc/PID/mem`, `/proc/PID/environ` and ptrace. A candidate can no
  longer open a judge's or a sibling's pipes through /proc.
- `drop_capabilities()` in an untrusted process started by root: a root process keeps CAP_SYS_PTRACE and
  CAP_DAC_OVERRIDE, which pass those checks; without any capability (bounding set emptied too, and
  no_new_privs) uid 0 is an ordinary user toward other processes.
"""

from __future__ import annotations

import ctypes
import errno
import os

_PR_SET_DUMPABLE = 4
_PR_CAPBSET_DROP = 24
_PR_SET_NO_NEW_PRIVS = 38
_PR_CAP_AMBIENT = 47
_PR_CAP_AMBIENT_CLEAR_ALL = 4
_LINUX_CAPABILITY_VERSION_3 = 0x20080522


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def _check(result: int, what: str) -> None:
    if result != 0:
        code = ctypes.get_errno()
        raise OSError(code, f"{what}: {os.strerror(code)}")


def make_undumpable() -> None:
    _check(_libc().prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0), "prctl(PR_SET_DUMPABLE, 0)")


def is_dumpable() -> bool:
    return _libc().prctl(3, 0, 0, 0, 0) == 1  # PR_GET_DUMPABLE


def _last_capability() -> int:
    try:
        with open("/proc/sys/kernel/cap_last_cap") as f:
            return int(f.read())
    except (OSError, ValueError):
        return 63


def drop_capabilities() -> None:
    """Give up every capability for good (no_new_privs first, so nothing can bring one back)."""
    libc = _libc()
    _check(libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "prctl(PR_SET_NO_NEW_PRIVS)")
    libc.prctl(_PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
    for cap in range(_last_capability() + 1):
        # EPERM: no CAP_SETPCAP, so nothing to drop (not root); EINVAL: a capability this kernel lacks.
        if libc.prctl(_PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 and ctypes.get_errno() not in (errno.EPERM, errno.EINVAL):
            _check(-1, f"prctl(PR_CAPBSET_DROP, {cap})")
    header = _CapHeader(_LINUX_CAPABILITY_VERSION_3, 0)
    data = (_CapData * 2)()
    _check(libc.capset(ctypes.byref(header), data), "capset")


def capabilities() -> int:
    """This process's effective capability set (a bit mask; 0 when it has none)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("CapEff:"):
                return int(line.split()[1], 16)
    return 0
