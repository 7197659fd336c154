"""Red-team attacks on the jail itself (docs/security.md): what a candidate can still reach once it runs in its
process, with the static layer skipped (`run_isolated`), so that the process isolation is tested on its own.
Each test has its own lane. Findings of the red-team session of 2026-11-26; which ones the sandbox stops and
which it does not is in each test's docstring (BREACH: the property fails today)."""

from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import os
import resource
import socket
import tempfile
import threading
import time
from pathlib import Path

from attack_support import (
    FAST, HONEST, RELU, assert_properties, attempted, candidate, dedicated_lane, describe, lane_still_judges, not_ok,
)
from sandbox_service.evaluation import run_isolated
from sandbox_service.lane import Lane
from sandbox_service.results import Status


@contextlib.contextmanager
def own_limits_restored():
    """The server of these tests is the test process itself: an attack on the server's limits lowers ours."""
    saved = {which: resource.getrlimit(which) for which in (resource.RLIMIT_NOFILE, resource.RLIMIT_FSIZE)}
    try:
        yield
    finally:
        for which, limits in saved.items():
            with contextlib.suppress(ValueError, OSError):
                resource.setrlimit(which, limits)


def _limits_attack(target: str) -> tuple[str, str | None, str]:
    with dedicated_lane() as lane, own_limits_restored():
        result = run_isolated(RELU, candidate("lowers_lane_process_limits", TARGET=repr(target)), FAST, lane)
        later = lane_still_judges(lane, runs=3)
    return describe(result), later, result.stdout_tail


def test_prlimit_on_the_template_cannot_fail_later_honest_kernels():
    """BREACH. prlimit64(template, RLIMIT_FSIZE, 0/0): the seccomp filter does not list prlimit64, the kernel asks only
    for matching uids (not dumpability, not capabilities), and Landlock has no hook for it. Every process the
    template forks afterwards inherits a hard file-size limit of 0, so later honest candidates die of SIGXFSZ
    writing their outputs (`runtime_error`), and a restarted judge would too."""
    verdict, later, stdout = _limits_attack("template")
    assert "attempted-prlimit-template" in stdout, f"the attack did not run: {verdict}"
    assert_properties(later)


def test_prlimit_on_idle_siblings_cannot_fail_later_honest_kernels():
    """BREACH. prlimit64(sibling, RLIMIT_FSIZE, 0/0) on every idle pre-forked candidate process (no signal, no /proc
    entry of theirs opened): the next honest evaluation that gets one dies of SIGXFSZ writing its outputs."""
    verdict, later, stdout = _limits_attack("siblings")
    assert "attempted-prlimit-siblings" in stdout and "RLIMIT_FSIZE 0" in stdout, f"the attack did not run: {verdict}"
    assert_properties(later)


def test_prlimit_on_the_judge_cannot_make_later_honest_kernels_cheats():
    """BREACH. prlimit64(judge, RLIMIT_NOFILE, 5/5): the judge can open no outputs file any more (EMFILE), which it
    reports as a malformed hand-over: every later honest (and wrong) evaluation of the lane is `cheat`
    (`malformed-handover`), for as long as the judge lives."""
    verdict, later, stdout = _limits_attack("judge")
    assert "attempted-prlimit-judge" in stdout, f"the attack did not run: {verdict}"
    assert_properties(later)


def test_prlimit_on_the_server_cannot_make_later_evaluations_infra_error():
    """BREACH. prlimit64(server, RLIMIT_NOFILE, 16): the server (the template's parent, found in /proc/PID/stat,
    which undumpable processes still show) can make no pipe for its next child: later evaluations `infra_error`.
    The server's memory watchdog threads die too (read_rss_mb meets EMFILE, which it does not catch), which pytest
    reports as an error at teardown: the children they watched run without a memory limit."""
    verdict, later, stdout = _limits_attack("server")
    assert "attempted-prlimit-server" in stdout, f"the attack did not run: {verdict}"
    assert_properties(later)


def _private_folder(stdout: str) -> Path | None:
    for line in stdout.splitlines():
        if line.startswith("private-folder "):
            return Path(line.removeprefix("private-folder "))
    return None


def test_a_candidates_folder_nested_too_deep_for_rmtree_does_not_outlive_its_evaluation():
    """BREACH. 1100 nested folders in the candidate's own folder: the server's shutil.rmtree (in the child's reaper
    thread) dies of RecursionError, so the folder and its payload stay in the work root for good (a 64 GB file per
    evaluation would fit RLIMIT_FSIZE); the lane still judges, but its disk fills."""
    with dedicated_lane() as lane:
        result = run_isolated(RELU, candidate("nests_its_folder_too_deep_to_remove", DEPTH="1100"), FAST, lane)
        folder = _private_folder(result.stdout_tail)
        deadline = time.monotonic() + 10
        while folder is not None and folder.exists() and time.monotonic() < deadline:
            time.sleep(0.2)
        left = folder is not None and folder.exists()
        later = lane_still_judges(lane, runs=2)
        if left:  # clean up what the server could not (iteratively), before the lane's own TemporaryDirectory does
            _remove_deep(folder)
    assert "attempted-deep-folder" in attempted_lines(result) and folder is not None, \
        f"the attack did not run: {describe(result)}"
    assert_properties(f"the candidate's folder {folder} is still in the work root 10 s after its evaluation"
                      if left else None, later)


def attempted_lines(result) -> list[str]:
    return [f"attempted-{what}" for what in attempted(result)]


def _remove_deep(top: Path) -> None:
    """rmtree without recursion (os.walk recurses too)."""
    stack = [str(top)]
    while stack:
        subdirs = []
        with os.scandir(stack[-1]) as entries:
            for entry in entries:
                if entry.is_dir(follow_symlinks=False):
                    subdirs.append(entry.path)
                else:
                    os.unlink(entry.path)
        if subdirs:
            stack += subdirs
        else:
            os.rmdir(stack.pop())


def test_memory_held_in_a_memfd_counts_against_the_memory_limit():
    """BREACH. 1.5 GB written into an unmapped memfd under a 1 GB memory limit: neither the RSS watchdog nor RLIMIT_AS
    sees it, and the evaluation comes back `ok`. Scaled up (one memfd per RLIMIT_FSIZE, 64 GB, as many as
    RLIMIT_NOFILE allows), a candidate takes the host's memory and the OOM killer picks a judge or the server."""
    options = dataclasses.replace(FAST, memory_limit_mb=1024)
    with dedicated_lane() as lane:
        result = run_isolated(RELU, candidate("holds_memory_the_watchdog_cannot_see", MB="1536"), options, lane)
    assert "memfd-memory" in attempted(result), f"the attack did not run: {describe(result)}"
    assert result.status != Status.OK, f"1.5 GB held under a 1 GB limit and still ok: {describe(result)}"


SYSV_KEYS = {"shm": 0x7A7A5301, "msg": 0x7A7A5302, "sem": 0x7A7A5303}


def _sysv_objects() -> dict[str, list[int]]:
    """Ids of the System V IPC objects with the attack's keys, from /proc/sysvipc ({kind: [id...]})."""
    found: dict[str, list[int]] = {}
    for kind, key in SYSV_KEYS.items():
        with contextlib.suppress(OSError):
            for line in Path(f"/proc/sysvipc/{kind}").read_text().splitlines()[1:]:
                fields = line.split()
                if int(fields[0]) == key:
                    found.setdefault(kind, []).append(int(fields[1]))
    return found


def _remove_sysv(found: dict[str, list[int]]) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    control = {"shm": libc.shmctl, "msg": libc.msgctl, "sem": libc.semctl}
    for kind, ids in found.items():
        for ident in ids:
            control[kind](ident, 0, None) if kind != "sem" else libc.semctl(ident, 0, 0)  # IPC_RMID


def test_system_v_ipc_objects_do_not_outlive_the_evaluation_nor_reach_a_later_one():
    """BREACH. shmget/msgget/semget are neither in the seccomp table nor path operations (Landlock): a 64 MB resident
    segment, a message queue and a semaphore set made by one candidate are still there after its evaluation (memory
    nobody frees, shmmax/shmall unlimited by default), and a later candidate on the lane reads the earlier one's
    marker out of the segment: a channel between evaluations."""
    _remove_sysv(_sysv_objects())
    try:
        with dedicated_lane() as lane:
            leave = run_isolated(RELU, candidate("leaves_sysv_ipc_objects", MODE='"leave"', MB="64"), FAST, lane)
            time.sleep(1.0)
            left = _sysv_objects()
            read = run_isolated(RELU, candidate("leaves_sysv_ipc_objects", MODE='"read"', MB="64"), FAST, lane)
    finally:
        _remove_sysv(_sysv_objects())
    assert "sysv-ipc-leave" in attempted(leave), f"the attack did not run: {describe(leave)}"
    assert "sysv-ipc-read" in attempted(read), f"the attack did not run: {describe(read)}"
    reached = [line for line in read.stdout_tail.splitlines() if line.startswith("read-from-earlier-evaluation")]
    assert_properties(f"System V IPC objects outlived their evaluation: {left}" if left else None,
                      f"a later candidate read what an earlier one left: {reached}" if reached else None)


def test_a_candidate_cannot_change_the_mode_of_the_work_root():
    """BREACH. chmod(work_root, 0) through ctypes: neither Landlock (no right covers chmod) nor seccomp nor the
    tripwire (only Python's os.chmod) stops it, and no verdict says `cheat` (the attacker's own evaluation fails as any
    other would: it could make the change after its last hand-over). Later candidate processes
    (uid 0 without capabilities here; the server's user elsewhere) cannot enter their folders: every later evaluation
    of the lane fails (`infra_error`)."""
    with dedicated_lane() as lane:
        mode = lane.work_root.stat().st_mode & 0o7777
        try:
            result = run_isolated(RELU, candidate("chmods_outside_its_folder"), FAST, lane)
            changed = lane.work_root.stat().st_mode & 0o7777
            later = lane_still_judges(lane, runs=2)
        finally:
            os.chmod(lane.work_root, mode)
    assert "chmod-work-root" in attempted(result), f"the attack did not run: {describe(result)}"
    assert_properties(f"the candidate changed the work root's mode from {oct(mode)} to {oct(changed)} "
                      f"(its own verdict: {describe(result)})" if changed != mode else None, later)


def test_files_in_a_memory_backed_work_root_count_against_the_memory_limit():
    """BREACH. The server's work root is on /dev/shm when it has room (as here): 1.5 GB reserved with posix_fallocate
    in the candidate's own folder, under a 1 GB memory limit, is RAM that neither the RSS watchdog nor RLIMIT_AS
    sees; the evaluation comes back `ok`. At 64 GB a file (RLIMIT_FSIZE) a candidate fills the tmpfs and the host."""
    options = dataclasses.replace(FAST, memory_limit_mb=1024)
    with tempfile.TemporaryDirectory(prefix="tritonrl-attack-lane-", dir="/dev/shm") as root:
        lane = Lane.create("interpreter", None, warm=1, work_root=Path(root))
        try:
            result = run_isolated(RELU, candidate("fills_its_own_folder", MB="1536"), options, lane)
        finally:
            lane.close()
    assert "fill-own-folder" in attempted(result), f"the attack did not run: {describe(result)}"
    assert result.status != Status.OK, f"1.5 GB of /dev/shm held under a 1 GB limit and still ok: {describe(result)}"



def test_a_unix_socket_outside_its_folder_cannot_be_reached():
    """BREACH. A service of the host listening on a pathname Unix socket (here one the test makes in a folder of its
    own; on a real host the container runtime's, the system bus, a database's...). The seccomp filter allows AF_UNIX
    sockets, Landlock (ABI 7 here) has no right for connect() on a socket file and scopes only abstract sockets,
    and the tripwire lets string addresses through: the candidate connects, sends, and is not reported."""
    with tempfile.TemporaryDirectory(prefix="tritonrl-attack-service-") as folder:
        path = os.path.join(folder, "service.sock")
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as service:
            service.bind(path)
            service.listen(1)
            service.settimeout(0.2)
            attempt = ("import socket\n"
                       "    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)\n"
                       f"    report('connect', s.connect_ex({path!r}))\n"
                       "    report('send', s.send(b'hello from a jailed candidate'))")
            with dedicated_lane() as lane:
                result = run_isolated(RELU, candidate("makes_one_system_call", ATTEMPT=attempt), FAST, lane)
            received = b""
            with contextlib.suppress(OSError):
                connection, _ = service.accept()
                with connection:
                    connection.settimeout(0.2)
                    received = connection.recv(100)
    assert "system-call" in attempted(result), f"the attack did not run: {describe(result)}"
    assert not received, (f"the candidate reached a Unix socket outside its folder and sent {received!r} "
                          f"(its verdict: {describe(result)})")


def test_a_candidate_cannot_read_a_concurrent_evaluations_kernel():
    """BREACH. Two evaluations of the ReLU task at once on one lane: an honest one (whose __init__ waits 3 s, as a
    slow import would) and one without a kernel of its own that finds the honest one's candidate.py in the work
    root, loads it and returns its outputs: `ok` for the copier. Reading other evaluations' files is not refused."""
    slow_honest = HONEST.replace("class ModelNew(nn.Module):", "import time as _t\n_t.sleep(3)\n\n\nclass ModelNew(nn.Module):", 1)
    with dedicated_lane(warm=2) as lane:
        results = {}
        honest = threading.Thread(target=lambda: results.setdefault("honest", run_isolated(RELU, slow_honest, FAST, lane)))
        honest.start()
        time.sleep(0.5)
        results["copier"] = run_isolated(RELU, candidate("copies_a_concurrent_evaluations_kernel"), FAST, lane)
        honest.join(60)
    copier = results["copier"]
    assert "copy-concurrent-kernel" in attempted(copier), f"the attack did not run: {describe(copier)}"
    borrowed = [line for line in copier.stdout_tail.splitlines() if line.startswith("borrowed")]
    assert_properties(f"the candidate loaded another evaluation's kernel ({borrowed}): {describe(copier)}"
                      if borrowed else None, not_ok(copier))
