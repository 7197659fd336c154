"""The jail inside a lane: an escape attempt is `cheat` with the jail's rule, it changes nothing for the
evaluations after it, and nothing it starts survives. The static layer is skipped (`run_isolated`), so
these show the process isolation holding on its own."""

from __future__ import annotations

import os
import tempfile
import textwrap
from pathlib import Path

import pytest

from sandbox_cases import CORRECT, FAST, INCORRECT, REFERENCE
from sandbox_service.evaluation import run_isolated
from sandbox_service.lane import Lane
from sandbox_service.results import Status


def with_prelude(statements: str) -> str:
    """The correct kernel, with `statements` run first in forward (as the candidate's own code)."""
    body = textwrap.indent(textwrap.dedent(statements).strip(), " " * 8)
    return CORRECT.replace("    def forward(self, a, b):\n", "    def forward(self, a, b):\n" + body + "\n", 1)


@pytest.fixture
def fresh_lane():
    """A lane of its own: an attack must not reach other tests' lanes even when it works."""
    with tempfile.TemporaryDirectory(prefix="tritonrl-test-jail-lane-") as root:
        lane = Lane.create("interpreter", None, warm=1, work_root=Path(root))
        yield lane
        lane.close()


def assert_lane_still_judges_right(lane: Lane, rounds: int = 3) -> None:
    for _ in range(rounds):
        assert run_isolated(REFERENCE, CORRECT, FAST, lane).status == Status.OK
        assert run_isolated(REFERENCE, INCORRECT, FAST, lane).status == Status.INCORRECT


@pytest.mark.parametrize("attempt, rule", [
    ("import os\nos.fork()", "jail-process-start"),
    ("import subprocess\nsubprocess.Popen(['sleep', '60'], start_new_session=True)", "jail-process-start"),
    ("import ctypes\nctypes.CDLL(None).fork()", "jail-denied-syscall"),
    ("import ctypes, os\nctypes.CDLL(None).kill(os.getppid(), 0)", "jail-denied-syscall"),
    ("import socket\nsocket.create_connection(('127.0.0.1', 9))", "jail-network"),
])
def test_escape_attempts_are_cheats_with_the_rule_that_caught_them(fresh_lane, attempt, rule):
    result = run_isolated(REFERENCE, with_prelude(attempt), FAST, fresh_lane)
    assert result.status == Status.CHEAT, (result.status, result.error)
    assert rule in {v.rule for v in result.violations}, result.violations
    assert not result.valid


def test_a_candidate_cannot_plant_files_for_later_evaluations(fresh_lane):
    """It tries to write into the work root, the trusted builds and the folder on the template's import path."""
    root = fresh_lane.work_root
    targets = [root / "planted.py", root / "trusted-builds" / "planted.so", Path(os.getcwd()) / "torch_extra.py"]
    attempt = "".join(f"\ntry:\n    open({str(t)!r}, 'w').write('x')\nexcept Exception:\n    pass" for t in targets)
    result = run_isolated(REFERENCE, with_prelude(attempt + "\nraise SystemExit(0)"), FAST, fresh_lane)
    assert result.status == Status.CHEAT and "jail-write-outside" in {v.rule for v in result.violations}
    assert not any(t.exists() for t in targets)
    assert_lane_still_judges_right(fresh_lane)


def test_nothing_a_candidate_starts_outlives_it(fresh_lane):
    marker = f"tritonrl-survivor-{os.getpid()}"
    attempt = f"""
    import ctypes, os
    libc = ctypes.CDLL(None)
    if libc.fork() == 0:
        libc.setsid()
        libc.prctl(15, b"{marker[:15]}", 0, 0, 0)
        import time
        time.sleep(120)
    """
    result = run_isolated(REFERENCE, with_prelude(attempt), FAST, fresh_lane)
    assert result.status == Status.CHEAT
    names = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            names.append(Path(f"/proc/{pid}/comm").read_text().strip())
        except OSError:
            continue
    assert marker[:15] not in names
    assert_lane_still_judges_right(fresh_lane)


def test_a_candidate_cannot_open_the_judge_s_or_a_sibling_s_pipes(fresh_lane):
    """Through /proc, as the same user, with the C library's open (no audit event, so the tripwire does not
    see it): the judge, the template and idle candidates are undumpable, the candidate has no capabilities
    and Landlock keeps it out of every process outside its domain, so every open fails and the attack fails
    its own evaluation only."""
    attempt = """
    import ctypes, os
    libc = ctypes.CDLL(None, use_errno=True)
    opened = []
    for pid in filter(str.isdigit, os.listdir('/proc')):
        if int(pid) == os.getpid():
            continue
        try:
            fds = os.listdir(f'/proc/{pid}/fd')
        except OSError:
            continue
        for fd in fds:
            descriptor = libc.open(f'/proc/{pid}/fd/{fd}'.encode(), os.O_WRONLY)
            if descriptor >= 0:
                os.close(descriptor)
                opened.append((pid, fd))
    if opened:
        raise SystemExit(f'opened {len(opened)} descriptors of other processes: {opened[:5]}')
    """
    result = run_isolated(REFERENCE, with_prelude(attempt), FAST, fresh_lane)
    assert "opened" not in (result.error or ""), result.error
    assert result.status == Status.OK, (result.status, result.error)
    assert_lane_still_judges_right(fresh_lane)


def test_opening_another_process_s_descriptor_from_python_is_an_escape_attempt(fresh_lane):
    """The same walk through Python's open: whether /proc lets the candidate list another process's
    descriptors varies from run to run, and when it does, the tripwire sees a write outside its folder.
    Either way nothing is opened and only the attacker's own evaluation is affected."""
    attempt = """
    import os
    opened = []
    for pid in filter(str.isdigit, os.listdir('/proc')):
        if int(pid) == os.getpid():
            continue
        try:
            for fd in os.listdir(f'/proc/{pid}/fd'):
                try:
                    open(f'/proc/{pid}/fd/{fd}', 'wb').close()
                    opened.append((pid, fd))
                except OSError:
                    pass
        except OSError:
            pass
    if opened:
        raise SystemExit(f'opened {len(opened)} descriptors of other processes: {opened[:5]}')
    """
    result = run_isolated(REFERENCE, with_prelude(attempt), FAST, fresh_lane)
    assert "opened" not in (result.error or ""), result.error
    assert result.status in (Status.OK, Status.CHEAT), (result.status, result.error)
    if result.status == Status.CHEAT:
        assert [v.rule for v in result.violations] == ["jail-write-outside"], result.violations
    assert_lane_still_judges_right(fresh_lane)
