"""Landlock: a jailed process reads only the system, Python and the sandbox, and writes only under its own
folder, even as root."""

from __future__ import annotations

import os

from jailed_child import run_jailed


def _try_read(path: str) -> str:
    try:
        with open(path) as f:
            f.read()
        return "read"
    except PermissionError:
        return "denied"


def _try_write(path: str) -> str:
    try:
        with open(path, "w") as f:
            f.write("x")
        return "written"
    except PermissionError:
        return "denied"


def test_writes_only_under_its_own_folder(tmp_path):
    mine, other = tmp_path / "mine", tmp_path / "other"
    mine.mkdir()
    other.mkdir()
    (other / "victim.py").write_text("honest = True\n")

    def body():
        return {
            "own": _try_write(str(mine / "scratch.txt")),
            "sibling": _try_write(str(other / "planted.py")),
            "overwrite": _try_write(str(other / "victim.py")),
            "read": _try_read(str(other / "victim.py")),
            "system": _try_read("/etc/hostname") if os.path.exists("/etc/hostname") else "read",
        }

    outcome = run_jailed(body, str(mine), seal=False)  # the kernel alone, no tripwire
    assert outcome.returncode == 0, outcome.said
    assert outcome.said["own"] == "written"
    assert outcome.said["sibling"] == "denied" and outcome.said["overwrite"] == "denied"
    assert outcome.said["read"] == "denied"  # another evaluation's folder: not even readable
    assert outcome.said["system"] == "read"
    assert not (other / "planted.py").exists() and (other / "victim.py").read_text() == "honest = True\n"


def test_its_own_proc_folder_leads_nowhere_else(tmp_path):
    """It may write its own /proc entries (the CUDA driver does), but not reach a file elsewhere through
    /proc/self/root, cwd or a descriptor it holds for reading (opened before the jail, as an inherited one)."""
    mine, other = tmp_path / "mine", tmp_path / "other"
    mine.mkdir()
    other.mkdir()
    (other / "victim.txt").write_text("v")
    fd = os.open(other / "victim.txt", os.O_RDONLY)

    def body():
        return {
            "comm": _try_write("/proc/self/comm"),
            "root": _try_write(f"/proc/self/root{other}/planted.txt"),
            "fd": _try_write(f"/proc/self/fd/{fd}"),
            "cwd": _try_write("/proc/self/cwd/../planted.txt"),
        }

    try:
        outcome = run_jailed(body, str(mine), seal=False)
    finally:
        os.close(fd)
    assert outcome.returncode == 0, outcome.said
    assert outcome.said["comm"] == "written"
    assert outcome.said["root"] == outcome.said["fd"] == outcome.said["cwd"] == "denied", outcome.said
    assert (other / "victim.txt").read_text() == "v" and not (other / "planted.txt").exists()


def test_cannot_rename_or_delete_outside_its_folder(tmp_path):
    mine, other = tmp_path / "mine", tmp_path / "other"
    mine.mkdir()
    other.mkdir()
    (other / "keep.txt").write_text("k")

    def body():
        results = {}
        for name, call in (("remove", lambda: os.remove(other / "keep.txt")),
                           ("rename", lambda: os.rename(other / "keep.txt", mine / "stolen.txt"))):
            try:
                call()
                results[name] = "done"
            except PermissionError:
                results[name] = "denied"
        return results

    outcome = run_jailed(body, str(mine), seal=False)
    assert outcome.said == {"remove": "denied", "rename": "denied", "problems": []}
    assert (other / "keep.txt").read_text() == "k"
