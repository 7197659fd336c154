"""The template process forks isolated children and tells how each one ended."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest

from sandbox_service.worker.process import ChildSpec
from sandbox_service.worker.zygote import Zygote, wait_ready


@pytest.fixture(scope="module")
def zygote(tmp_path_factory):
    z = Zygote("interpreter", None, tmp_path_factory.mktemp("zygote")).start()
    yield z
    z.close()


def _spawn(zygote, role="judge"):
    child = zygote.spawn(ChildSpec(role, "interpreter"))
    wait_ready(child, 60)
    return child


def test_a_child_is_its_own_process_group_with_a_scrubbed_environment(zygote, monkeypatch):
    child = _spawn(zygote)
    try:
        assert os.getpgid(child.pid) == child.pid
        assert child.pid != zygote._popen.pid
        environ = Path(f"/proc/{child.pid}/environ").read_bytes().split(b"\0")
        names = {e.split(b"=", 1)[0].decode() for e in environ if e}
        assert "TRITON_INTERPRET" in names and "HOME" in names
        assert not {n for n in names if "KEY" in n or "TOKEN" in n}
        assert Path(child.private_dir).is_dir()
    finally:
        child.close()
    assert not Path(child.private_dir).exists()


def test_every_spawn_is_a_fresh_process(zygote):
    first, second = _spawn(zygote), _spawn(zygote)
    try:
        assert first.pid != second.pid
    finally:
        first.close()
        second.close()


def test_how_a_child_ended_is_reported(zygote):
    child = _spawn(zygote)
    os.kill(child.pid, signal.SIGSEGV)
    assert child.describe_exit(wait_s=10) == "killed by signal SIGSEGV"
    child.close()


def test_a_frozen_child_does_not_run_until_thawed(zygote):
    child = _spawn(zygote)
    try:
        child.freeze()
        time.sleep(0.2)
        state = Path(f"/proc/{child.pid}/stat").read_text().split()[2]
        assert state == "T"
        child.thaw()
        time.sleep(0.2)
        assert Path(f"/proc/{child.pid}/stat").read_text().split()[2] != "T"
    finally:
        child.close()


def test_a_dead_template_is_started_again(tmp_path):
    z = Zygote("interpreter", None, tmp_path).start()
    try:
        first_pid = z._popen.pid
        os.kill(first_pid, signal.SIGKILL)
        time.sleep(0.5)
        child = _spawn(z)
        assert z._popen.pid != first_pid
        child.close()
    finally:
        z.close()


def test_children_are_named_after_their_role(zygote):
    child = _spawn(zygote, "judge")
    try:
        assert Path(f"/proc/{child.pid}/comm").read_text().strip() == "trl-judge"
        assert Path(f"/proc/{zygote._popen.pid}/comm").read_text().strip() == "trl-template"
    finally:
        child.close()


def test_a_private_folder_of_any_depth_is_removed(tmp_path):
    """A child may nest folders deeper than Python's recursion limit; the server removes them all the same."""
    from sandbox_service.worker.process import remove_tree

    root = tmp_path / "private"
    path = root
    os.mkdir(root)
    for _ in range(1500):  # one mkdir at a time: os.makedirs itself recurses per level
        path = path / "d"
        os.mkdir(path)
    (path / "payload").write_bytes(b"x")
    (root / "link").symlink_to(tmp_path)  # removed as a link, never followed
    remove_tree(root)
    assert not root.exists() and tmp_path.exists()


def test_a_folder_is_measured_by_the_space_its_files_take(tmp_path):
    from sandbox_service.worker import process

    (tmp_path / "a").mkdir()
    with open(tmp_path / "a" / "big", "wb") as f:
        f.write(b"x" * (3 << 20))
    assert 3 <= process.folder_mb(tmp_path) < 4
    for i in range(process.MAX_FOLDER_ENTRIES // 1000 + 1):
        (tmp_path / f"f{i}").touch()
    assert process.folder_mb(tmp_path) < 4
