"""Escape attempts the jail stops today (red-team session of 2026-11-26), each made through the C library (ctypes) so
that the tripwire is bypassed and the kernel's side of the jail answers. They document the guarantee:
- system calls the seccomp filter denies kill the candidate with SIGSYS: `cheat`, rule `jail-denied-syscall`
  (x32 system calls, io_uring, clone without CLONE_THREAD, namespaces, ptrace, pidfds, netlink sockets, signals
  to other processes, process_vm_readv...); clone3 answers ENOSYS and nothing else happens;
- writes outside the candidate's folder are refused by Landlock however the path is spelled (hard links in,
  renames out, symbolic links, a directory descriptor, /proc/self/root, /proc/self/fd, another process's cwd,
  /dev/shm, truncation), and abstract Unix sockets made outside its domain cannot be reached.
All through `run_isolated` (static layer skipped), on one lane for the module; the lane must still judge after."""

from __future__ import annotations

import os
import socket
import tempfile
from pathlib import Path

import pytest

from attack_support import FAST, RELU, assert_properties, attempted, candidate, describe, lane_still_judges
from sandbox_service.evaluation import run_isolated
from sandbox_service.lane import Lane
from sandbox_service.results import Status


@pytest.fixture(scope="module")
def lane():
    with tempfile.TemporaryDirectory(prefix="tritonrl-attack-lane-") as root:
        lane = Lane.create("interpreter", None, warm=1, work_root=Path(root))
        try:
            yield lane
        finally:
            lane.close()


TEMPLATE = "os.getppid()"
KILLED = {
    "x32 getpid": "libc.syscall(0x40000000 | 39)",
    "io_uring_setup": "libc.syscall(425, 8, ctypes.create_string_buffer(256))",
    "clone without CLONE_THREAD": "libc.syscall(56, 17, 0, 0, 0, 0)",
    "vfork": "libc.syscall(58)",
    "unshare a user namespace": "libc.syscall(272, 0x10000000)",
    "ptrace attach to the template": f"libc.syscall(101, 16, {TEMPLATE}, 0, 0)",
    "pidfd_open of the template": f"libc.syscall(434, {TEMPLATE}, 0)",
    "process_vm_readv of the template": f"libc.syscall(310, {TEMPLATE}, 0, 0, 0, 0, 0)",
    "netlink socket": "libc.syscall(41, 16, 3, 0)",
    "kill(-1)": "libc.syscall(62, -1, 0)",
    "tgkill on the template": f"libc.syscall(234, {TEMPLATE}, {TEMPLATE}, 0)",
    "rt_sigqueueinfo to the template": f"libc.syscall(129, {TEMPLATE}, 0, ctypes.create_string_buffer(128))",
    "bpf": "libc.syscall(321, 0, 0, 0)",
    "userfaultfd": "libc.syscall(323, 0)",
    "keyctl": "libc.syscall(250, 0, 0)",
    "mount": "libc.syscall(165, b'none', b'/tmp', b'tmpfs', 0, 0)",
    "execve": "libc.syscall(59, b'/bin/true', None, None)",
}


@pytest.mark.parametrize("what", sorted(KILLED))
def test_a_denied_system_call_is_a_cheat(lane, what):
    attempt = f"report({what!r}, {KILLED[what]})"
    result = run_isolated(RELU, candidate("makes_one_system_call", ATTEMPT=attempt), FAST, lane)
    assert "system-call" in attempted(result), f"the attack did not run: {describe(result)}"
    assert result.status == Status.CHEAT and "jail-denied-syscall" in {v.rule for v in result.violations}, \
        describe(result)


def test_clone3_answers_enosys_and_changes_nothing(lane):
    result = run_isolated(RELU, candidate("makes_one_system_call", ATTEMPT="report('clone3', libc.syscall(435, 0, 0))"),
                          FAST, lane)
    assert "answer clone3 -1 errno 38" in result.stdout_tail, describe(result)
    assert result.status == Status.OK, describe(result)


def _planted(work_root: Path) -> list[str]:
    return sorted(p.name for p in work_root.iterdir() if p.name.startswith("planted"))


WRITES = {
    "hard link of an outside file into its folder, then written": (
        "report('link', libc.link(os.path.join(work_root, 'victim').encode(), b'hard'))\n"
        "    report('write-through-link', libc.open(b'hard', os.O_WRONLY | os.O_TRUNC))"),
    "rename out of its folder": (
        "open('mine', 'w').close()\n"
        "    report('rename', libc.rename(b'mine', os.path.join(work_root, 'planted-rename').encode()))"),
    "symbolic link to the work root, opened for writing": (
        "libc.symlink(os.path.join(work_root, 'planted-symlink').encode(), b'sl')\n"
        "    report('open', libc.open(b'sl', os.O_WRONLY | os.O_CREAT, 0o644))"),
    "openat on a descriptor of the work root": (
        "d = libc.open(work_root.encode(), os.O_RDONLY | os.O_DIRECTORY)\n"
        "    report('open-dir', d)\n"  # refused too now: the work root is not even readable
        "    report('openat', libc.openat(d, b'planted-openat', os.O_WRONLY | os.O_CREAT, 0o644))"),
    "/proc/self/root": (
        "report('open', libc.open(('/proc/self/root' + os.path.join(work_root, 'planted-root')).encode(), "
        "os.O_WRONLY | os.O_CREAT, 0o644))"),
    "/proc/self/fd of an O_PATH descriptor": (
        "fd = os.open(os.path.join(work_root, 'victim'), os.O_PATH)\n"
        "    report('open', libc.open(f'/proc/self/fd/{fd}'.encode(), os.O_WRONLY | os.O_TRUNC))"),
    "the template's cwd": (
        "report('open', libc.open(f'/proc/{os.getppid()}/cwd/planted-cwd'.encode(), os.O_WRONLY | os.O_CREAT, 0o644))"),
    "/dev/shm": "report('open', libc.open(b'/dev/shm/planted-by-atk', os.O_WRONLY | os.O_CREAT, 0o644))",
    "truncate an outside file": "report('truncate', libc.truncate(os.path.join(work_root, 'victim').encode(), 0))",
    "mkdir in the work root": "report('mkdir', libc.mkdir(os.path.join(work_root, 'planted-dir').encode(), 0o755))",
    "fifo in the work root": "report('mkfifo', libc.mkfifo(os.path.join(work_root, 'planted-fifo').encode(), 0o644))",
    "rename its own folder away": (
        "report('rename', libc.rename(os.getcwd().encode(), os.path.join(work_root, 'planted-own').encode()))"),
}


@pytest.mark.parametrize("what", sorted(WRITES))
def test_writes_outside_its_folder_are_refused(lane, what):
    victim = lane.work_root / "victim"
    victim.write_text("the server's")
    result = run_isolated(RELU, candidate("makes_one_system_call", ATTEMPT=WRITES[what]), FAST, lane)
    planted = _planted(lane.work_root)
    assert "system-call" in attempted(result), f"the attack did not run: {describe(result)}"
    answers = [line for line in result.stdout_tail.splitlines() if line.startswith("answer")]
    assert_properties(f"planted {planted}" if planted else None,
                      None if victim.read_text() == "the server's" else "the outside file changed",
                      None if not Path("/dev/shm/planted-by-atk").exists() else "/dev/shm/planted-by-atk written",
                      None if answers and all(" -1 errno " in a for a in answers) else f"a call succeeded: {answers}")


def test_an_abstract_unix_socket_made_outside_cannot_be_reached(lane):
    name = f"\0tritonrl-atk-{os.getpid()}"
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as server:
        server.bind(name)
        server.listen(1)
        server.settimeout(0.1)
        attempt = ("import socket\n"
                   f"    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)\n"
                   f"    report('connect', s.connect_ex({name!r}))")
        result = run_isolated(RELU, candidate("makes_one_system_call", ATTEMPT=attempt), FAST, lane)
        try:
            connection, _ = server.accept()
            connection.close()
            reached = True
        except OSError:
            reached = False
    assert "system-call" in attempted(result), f"the attack did not run: {describe(result)}"
    assert not reached, f"the candidate connected to an abstract socket made outside its domain: {result.stdout_tail}"


def test_the_lane_still_judges_after_the_attempts(lane):
    assert_properties(lane_still_judges(lane, runs=3))


def test_sigio_signals_routed_to_lane_processes_do_not_reach_them(lane):
    """F_SETOWN(template or judge) + F_SETSIG(SIGKILL) + O_ASYNC on a pipe of its own, then a write: fcntl is not in
    the seccomp table, and the kernel's own check (sigio_perm) passes for the same user; Landlock's signal scoping
    (ABI 6+) drops the SIGKILL."""
    attempt = ("import fcntl\n"
               "    for target in [os.getppid()] + _processes('trl-judge'):\n"
               "        r, w = os.pipe()\n"
               "        report('setown', libc.fcntl(r, 8, target))\n"
               "        report('setsig', libc.fcntl(r, 10, 9))\n"
               "        fcntl.fcntl(r, fcntl.F_SETFL, fcntl.fcntl(r, fcntl.F_GETFL) | os.O_ASYNC)\n"
               "        os.write(w, b'x')\n"
               "    import time\n"
               "    time.sleep(0.5)")
    template = lane.zygote._popen.pid
    result = run_isolated(RELU, candidate("makes_one_system_call", ATTEMPT=attempt), FAST, lane)
    assert "system-call" in attempted(result), f"the attack did not run: {describe(result)}"
    assert lane.zygote._popen.poll() is None and lane.zygote._popen.pid == template, "the template died"
    assert result.status == Status.OK, describe(result)
