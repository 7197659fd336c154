"""A seccomp filter for untrusted processes: no new processes, no exec, no reaching other processes.

Installed (with TSYNC, so every thread of the process gets it) after the process made its CUDA context and
before any untrusted code runs. A denied system call kills the whole process with SIGSYS
(SECCOMP_RET_KILL_PROCESS): nothing the candidate catches or ignores, and the server reads the signal as
an escape attempt (`cheat`, rule `jail-denied-syscall`). What is denied, and why:

- new processes (fork, vfork, clone without CLONE_THREAD) and exec: nothing the candidate starts can
  outlive it or compute where the monitor cannot see; threads stay allowed (clone3 answers ENOSYS, so
  the C library falls back to clone, whose flags the filter can read);
- reaching other processes: ptrace, process_vm_readv/writev, kcmp, pidfd_*, process_madvise, and signals
  to any process but itself (kill, tgkill, rt_*sigqueueinfo checked against its own pid; tkill denied);
- sockets (no network, and no Unix socket of another process, which a path reaches whatever Landlock says;
  `socketpair` stays: it only connects to itself), System V IPC and POSIX message queues (they outlive the
  process), and the kernel's larger attack surfaces a kernel grader never needs (namespaces, mounts, bpf,
  perf, io_uring, userfaultfd, keyrings, modules, handles, clocks).

Answered EPERM instead (a library may try them on its own behalf; the attempt is harmless when refused):
resource limits, priorities, CPU affinity and scheduling of any process but itself (`prlimit64`,
`setpriority`, `ioprio_set`, `sched_set*`: the kernel lets a process of the same user change another's,
undumpable or not), mode, owner and time changes of files (Landlock does not cover them, so a candidate could
`chmod` the work root), and `memfd_create` (memory the RSS watchdog does not see).

Built by hand as classic BPF through ctypes: the filter is a few dozen instructions and needs no library.
Only x86-64 has a syscall table here; elsewhere `supported()` is False and the jail says so.
"""

from __future__ import annotations

import ctypes
import os
import platform
import struct

AUDIT_ARCH_X86_64 = 0xC000003E
X32_SYSCALL_BIT = 0x40000000

RET_KILL_PROCESS = 0x80000000
RET_ALLOW = 0x7FFF0000
RET_ERRNO = 0x00050000
ENOSYS = 38
EPERM = 1

CLONE_THREAD = 0x00010000

_SECCOMP_SET_MODE_FILTER = 1
_SECCOMP_FILTER_FLAG_TSYNC = 1
_PR_SET_NO_NEW_PRIVS = 38

# classic BPF opcodes
_LD_W_ABS = 0x20
_JEQ_K = 0x15
_JSET_K = 0x45
_JGE_K = 0x35
_RET_K = 0x06

# struct seccomp_data: int nr; __u32 arch; __u64 instruction_pointer; __u64 args[6]
_NR, _ARCH, _ARG0 = 0, 4, 16

X86_64 = {
    "socket": 41, "clone": 56, "fork": 57, "vfork": 58, "execve": 59, "kill": 62, "ptrace": 101,
    "rt_sigqueueinfo": 129, "pivot_root": 155, "adjtimex": 159, "chroot": 161, "acct": 163, "settimeofday": 164,
    "mount": 165, "umount2": 166, "swapon": 167, "swapoff": 168, "reboot": 169, "iopl": 172, "ioperm": 173,
    "init_module": 175, "delete_module": 176, "quotactl": 179, "tkill": 200, "clock_settime": 227, "tgkill": 234,
    "kexec_load": 246, "add_key": 248, "request_key": 249, "keyctl": 250, "migrate_pages": 256, "unshare": 272,
    "move_pages": 279, "rt_tgsigqueueinfo": 297, "perf_event_open": 298, "fanotify_init": 300,
    "name_to_handle_at": 303, "open_by_handle_at": 304, "setns": 308, "process_vm_readv": 310,
    "process_vm_writev": 311, "kcmp": 312, "finit_module": 313, "kexec_file_load": 320, "bpf": 321,
    "execveat": 322, "userfaultfd": 323, "pidfd_send_signal": 424, "io_uring_setup": 425, "io_uring_enter": 426,
    "io_uring_register": 427, "open_tree": 428, "move_mount": 429, "fsopen": 430, "fsconfig": 431, "fsmount": 432,
    "fspick": 433, "pidfd_open": 434, "clone3": 435, "pidfd_getfd": 438, "process_madvise": 440,
    "mount_setattr": 442,
    "shmget": 29, "shmat": 30, "shmctl": 31, "semget": 64, "semop": 65, "semctl": 66, "shmdt": 67, "msgget": 68,
    "msgsnd": 69, "msgrcv": 70, "msgctl": 71, "semtimedop": 220, "mq_open": 240, "mq_unlink": 241,
    "mq_timedsend": 242, "mq_timedreceive": 243, "mq_notify": 244, "mq_getsetattr": 245,
    "chmod": 90, "fchmod": 91, "chown": 92, "fchown": 93, "lchown": 94, "utime": 132, "utimes": 235,
    "fchownat": 260, "futimesat": 261, "fchmodat": 268, "utimensat": 280, "fchmodat2": 452,
    "setpriority": 141, "sched_setparam": 142, "sched_setscheduler": 144, "sched_setaffinity": 203,
    "ioprio_set": 251, "prlimit64": 302, "sched_setattr": 314, "memfd_create": 319,
}

# Denied outright (everything else in the table has its own rule below).
DENIED = (
    "fork", "vfork", "execve", "execveat", "ptrace", "tkill", "process_vm_readv", "process_vm_writev", "kcmp",
    "pidfd_open", "pidfd_getfd", "pidfd_send_signal", "process_madvise", "unshare", "setns", "mount", "umount2",
    "pivot_root", "chroot", "open_tree", "move_mount", "fsopen", "fsconfig", "fsmount", "fspick", "mount_setattr",
    "bpf", "perf_event_open", "userfaultfd", "io_uring_setup", "io_uring_enter", "io_uring_register", "add_key",
    "request_key", "keyctl", "init_module", "finit_module", "delete_module", "kexec_load", "kexec_file_load",
    "reboot", "swapon", "swapoff", "name_to_handle_at", "open_by_handle_at", "fanotify_init", "migrate_pages",
    "move_pages", "acct", "settimeofday", "clock_settime", "adjtimex", "iopl", "ioperm", "quotactl", "socket",
    "shmget", "shmat", "shmctl", "semget", "semop", "semctl", "shmdt", "msgget", "msgsnd", "msgrcv", "msgctl",
    "semtimedop", "mq_open", "mq_unlink", "mq_timedsend", "mq_timedreceive", "mq_notify", "mq_getsetattr",
)
# Answered EPERM whatever their arguments.
REFUSED = ("chmod", "fchmod", "fchmodat", "fchmodat2", "chown", "fchown", "lchown", "fchownat", "utime", "utimes",
           "futimesat", "utimensat", "memfd_create")
# Answered EPERM unless their first argument names the process itself (0 or its pid).
OWN_PROCESS_ONLY = ("prlimit64", "sched_setparam", "sched_setscheduler", "sched_setaffinity", "sched_setattr")
# (which, who, ...): allowed only for which == 0 (the process: PRIO_PROCESS; IOPRIO_WHO_PROCESS is 1) and who
# naming the process itself.
WHO_PROCESS = {"setpriority": 0, "ioprio_set": 1}


def supported() -> bool:
    return platform.system() == "Linux" and platform.machine() in ("x86_64", "AMD64")


def _insn(code: int, jt: int, jf: int, k: int) -> bytes:
    return struct.pack("HBBI", code, jt, jf, k & 0xFFFFFFFF)


def _on_syscall(nr: int, block: list[bytes]) -> list[bytes]:
    """`block` runs when the syscall number (in A) is `nr`; it must end in a return."""
    return [_insn(_JEQ_K, 0, len(block), nr), *block]


def _first_arg_is(values: list[int], otherwise: int = RET_KILL_PROCESS, arg: int = 0) -> list[bytes]:
    """Allow when the low 32 bits of argument `arg` are one of `values` (a pid_t), else `otherwise`."""
    block = [_insn(_LD_W_ABS, 0, 0, _ARG0 + 8 * arg)]
    for index, value in enumerate(values):
        remaining = len(values) - index - 1
        block.append(_insn(_JEQ_K, remaining + 1, 0, value))  # to the ALLOW after the final refusal
    return [*block, _insn(_RET_K, 0, 0, otherwise), _insn(_RET_K, 0, 0, RET_ALLOW)]


def _who_is_itself(which: int, pid: int) -> list[bytes]:
    """(which, who) calls: allowed for `which` and who in {0, pid}, else EPERM."""
    refuse = RET_ERRNO | EPERM
    rest = _first_arg_is([0, pid], refuse, arg=1)
    return [_insn(_LD_W_ABS, 0, 0, _ARG0), _insn(_JEQ_K, 1, 0, which), _insn(_RET_K, 0, 0, refuse), *rest]


def build_program(pid: int, table: dict[str, int] = X86_64) -> bytes:
    """The filter for process `pid` (its own pid is the only signal target it keeps)."""
    kill = _insn(_RET_K, 0, 0, RET_KILL_PROCESS)
    allow = _insn(_RET_K, 0, 0, RET_ALLOW)
    program = [
        _insn(_LD_W_ABS, 0, 0, _ARCH),
        _insn(_JEQ_K, 1, 0, AUDIT_ARCH_X86_64),
        kill,
        _insn(_LD_W_ABS, 0, 0, _NR),
        _insn(_JGE_K, 0, 1, X32_SYSCALL_BIT),
        kill,
    ]
    for name in DENIED:
        program += _on_syscall(table[name], [kill])
    program += _on_syscall(table["clone3"], [_insn(_RET_K, 0, 0, RET_ERRNO | ENOSYS)])
    program += _on_syscall(table["clone"], [
        _insn(_LD_W_ABS, 0, 0, _ARG0),
        _insn(_JSET_K, 0, 1, CLONE_THREAD),
        allow,
        kill,
    ])
    own = [pid, 0, (-pid) & 0xFFFFFFFF]  # itself, its own process group (it leads its own session)
    program += _on_syscall(table["kill"], _first_arg_is(own))
    program += _on_syscall(table["rt_sigqueueinfo"], _first_arg_is([pid]))
    program += _on_syscall(table["tgkill"], _first_arg_is([pid]))
    program += _on_syscall(table["rt_tgsigqueueinfo"], _first_arg_is([pid]))
    for name in REFUSED:
        program += _on_syscall(table[name], [_insn(_RET_K, 0, 0, RET_ERRNO | EPERM)])
    for name in OWN_PROCESS_ONLY:
        program += _on_syscall(table[name], _first_arg_is([0, pid], RET_ERRNO | EPERM))
    for name, which in WHO_PROCESS.items():
        program += _on_syscall(table[name], _who_is_itself(which, pid))
    program.append(allow)
    return b"".join(program)


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def install(pid: int | None = None) -> None:
    """Install the filter on every thread of this process. OSError if the kernel refuses."""
    if not supported():
        raise OSError("seccomp filter: only x86-64 Linux has a syscall table here")
    code = build_program(os.getpid() if pid is None else pid)
    buffer = ctypes.create_string_buffer(code, len(code))
    program = _SockFprog(len(code) // 8, ctypes.addressof(buffer))
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS)")
    libc.syscall.restype = ctypes.c_long
    seccomp = 317
    if libc.syscall(seccomp, _SECCOMP_SET_MODE_FILTER, _SECCOMP_FILTER_FLAG_TSYNC, ctypes.byref(program)) != 0:
        raise OSError(ctypes.get_errno(), f"seccomp(SET_MODE_FILTER): {os.strerror(ctypes.get_errno())}")
