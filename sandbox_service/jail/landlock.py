"""Landlock: an untrusted process reads only the system, Python and the sandbox, and writes only its own folders.

Landlock is an unprivileged Linux security module (5.13+): a process restricts itself, for good, and
every thread and process it creates later inherits the restriction. It works the same with or without
root (root without capabilities, see `capabilities.py`, is confined like anyone). Applied in the forked
child before anything else runs there, while it has one thread.

Rights handled: every file-system right of the kernel's ABI except IOCTL_DEV (the GPU is driven by ioctls
on device files the process may open). Granted: read and execute beneath the system's folders, Python's
prefixes and every folder on its import path (`readable_roots()`: never the work root, whose other evaluations'
folders must stay unread: a candidate could otherwise load a concurrent evaluation's kernel); everything under
the given writable folders; read and write on the GPU's and the null device files, and beneath the process's own
`/proc/PID` (the CUDA driver writes there while it initialises: without it cuInit fails with error 304 on
the lent H100s; a path through `/proc/PID/root`, `cwd` or `fd/N` is judged where it leads, as always). With ABI 6+ the process is also
scoped: it cannot signal processes outside its domain or connect to abstract Unix sockets made outside it.
"""

from __future__ import annotations

import ctypes
import glob
import os
import sys
from collections.abc import Iterable

_CREATE_RULESET, _ADD_RULE, _RESTRICT_SELF = 444, 445, 446  # the same number on every architecture
_CREATE_RULESET_VERSION = 1 << 0
_RULE_PATH_BENEATH = 1

EXECUTE = 1 << 0
WRITE_FILE = 1 << 1
READ_FILE = 1 << 2
READ_DIR = 1 << 3
REMOVE_DIR = 1 << 4
REMOVE_FILE = 1 << 5
MAKE_CHAR = 1 << 6
MAKE_DIR = 1 << 7
MAKE_REG = 1 << 8
MAKE_SOCK = 1 << 9
MAKE_FIFO = 1 << 10
MAKE_BLOCK = 1 << 11
MAKE_SYM = 1 << 12
REFER = 1 << 13  # ABI 2
TRUNCATE = 1 << 14  # ABI 3
SCOPE_ABSTRACT_UNIX_SOCKET = 1 << 0  # ABI 6
SCOPE_SIGNAL = 1 << 1  # ABI 6

READ = EXECUTE | READ_FILE | READ_DIR
DEVICE_FILES = ("/dev/null", "/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools", "/dev/nvidia[0-9]*",
                "/dev/nvidia-caps/*")


class _RulesetAttr(ctypes.Structure):
    _fields_ = [("handled_access_fs", ctypes.c_uint64), ("handled_access_net", ctypes.c_uint64),
                ("scoped", ctypes.c_uint64)]


class _PathBeneathAttr(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


def _libc() -> ctypes.CDLL:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    return libc


def abi_version() -> int:
    """The kernel's Landlock ABI (0: not available)."""
    try:
        version = _libc().syscall(_CREATE_RULESET, None, ctypes.c_size_t(0), ctypes.c_uint32(_CREATE_RULESET_VERSION))
    except (OSError, AttributeError):
        return 0
    return max(int(version), 0)


def _handled(abi: int) -> int:
    rights = (1 << 13) - 1
    if abi >= 2:
        rights |= REFER
    if abi >= 3:
        rights |= TRUNCATE
    return rights


def _device_files() -> list[str]:
    return sorted({path for pattern in DEVICE_FILES for path in glob.glob(pattern)})


def _is_gpu_file(path: str) -> bool:
    return path.startswith("/dev/nvidia")


# System folders a process may read (those that exist): libraries, the GPU driver, configuration, devices.
SYSTEM_ROOTS = ("/usr", "/lib", "/lib32", "/lib64", "/libx32", "/bin", "/sbin", "/etc", "/opt", "/proc", "/sys",
                "/dev")


def readable_roots() -> list[str]:
    """What an untrusted process may read: the system's folders, Python's prefixes and this process's import
    path (the sandbox's own code, the virtual environment, carried wheels)."""
    candidates = [*SYSTEM_ROOTS, sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix, *sys.path]
    roots = []
    for path in candidates:
        if path and os.path.isabs(path) and os.path.exists(path):
            real = os.path.realpath(path)
            if real not in roots:
                roots.append(real)
    return roots


def restrict(writable: Iterable[str], readable: Iterable[str] | None = None, abi: int | None = None,
             gpu: bool = True) -> int:
    """Confine this process (and all it starts later): read only beneath `readable` (default
    `readable_roots()`), write only beneath `writable`, and open the GPU's device files only with `gpu`
    (the driver opens them read-write: without the rule no CUDA context can be made). Returns the ABI used.
    OSError if Landlock is missing or refuses."""
    abi = abi_version() if abi is None else abi
    if abi < 1:
        raise OSError("Landlock is not available in this kernel")
    libc = _libc()
    handled = _handled(abi)
    attr = _RulesetAttr(handled, 0, (SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL) if abi >= 6 else 0)
    size = ctypes.sizeof(_RulesetAttr) if abi >= 6 else 8  # older kernels know only the first field
    ruleset = libc.syscall(_CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(size), ctypes.c_uint32(0))
    if ruleset < 0:
        raise OSError(ctypes.get_errno(), f"landlock_create_ruleset: {os.strerror(ctypes.get_errno())}")
    try:
        rules = [(path, READ) for path in (readable_roots() if readable is None else readable)]
        rules += [(path, handled & ~(REFER if abi < 2 else 0)) for path in writable]
        rules += [(path, READ_FILE | WRITE_FILE) for path in _device_files() if gpu or not _is_gpu_file(path)]
        rules.append((f"/proc/{os.getpid()}", READ_FILE | WRITE_FILE | READ_DIR | TRUNCATE))
        for path, access in rules:
            _add_rule(libc, ruleset, path, access & handled)
        if libc.prctl(38, 1, 0, 0, 0) != 0:  # PR_SET_NO_NEW_PRIVS: required to restrict oneself unprivileged
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS)")
        if libc.syscall(_RESTRICT_SELF, ctypes.c_int(ruleset), ctypes.c_uint32(0)) != 0:
            raise OSError(ctypes.get_errno(), f"landlock_restrict_self: {os.strerror(ctypes.get_errno())}")
    finally:
        os.close(ruleset)
    return abi


def _add_rule(libc: ctypes.CDLL, ruleset: int, path: str, access: int) -> None:
    fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    try:
        if not os.path.isdir(path):
            access &= EXECUTE | WRITE_FILE | READ_FILE | TRUNCATE  # rights that apply to a file
        rule = _PathBeneathAttr(access, fd)
        if libc.syscall(_ADD_RULE, ctypes.c_int(ruleset), ctypes.c_int(_RULE_PATH_BENEATH), ctypes.byref(rule),
                        ctypes.c_uint32(0)) != 0:
            raise OSError(ctypes.get_errno(), f"landlock_add_rule({path}): {os.strerror(ctypes.get_errno())}")
    finally:
        os.close(fd)
