"""The tripwire reports what Python code tries (a process, a write outside, a signal, the network) and
refuses it, before the kernel would."""

from __future__ import annotations

import os
import socket
import subprocess

from jailed_child import run_jailed

from sandbox_service.jail.tripwire import Tripwire


def test_each_escape_is_reported_once_with_its_rule(tmp_path):
    attempts = {
        "process": lambda: subprocess.run(["true"]),
        "write": lambda: open("/tmp/tritonrl-tripwire-test.txt", "w"),
        "signal": lambda: os.kill(1, 0),
        "network": lambda: socket.socket(socket.AF_INET, socket.SOCK_STREAM),
    }
    rules = {}
    for name, attempt in attempts.items():
        def body(attempt=attempt):
            try:
                attempt()
                return {"refused": False}
            except PermissionError as exc:
                return {"refused": True, "why": str(exc)}

        outcome = run_jailed(body, str(tmp_path))
        assert outcome.returncode == 0 and outcome.said["refused"], (name, outcome)
        assert len(outcome.reports) == 1, outcome.reports
        rules[name] = outcome.reports[0][0]
    assert rules == {"process": "jail-process-start", "write": "jail-write-outside", "signal": "jail-signal",
                     "network": "jail-network"}


def test_work_in_its_own_folder_is_not_an_escape(tmp_path):
    def body():
        (tmp_path / "out").mkdir()
        with open(tmp_path / "out" / "t.bin", "wb") as f:
            f.write(b"1")
        os.rename(tmp_path / "out" / "t.bin", tmp_path / "out" / "u.bin")
        os.kill(os.getpid(), 0)
        return {"read": open("/etc/hostname").read() is not None}

    outcome = run_jailed(body, str(tmp_path))
    assert outcome.returncode == 0 and outcome.reports == [], outcome


def test_a_copy_from_outside_into_its_folder_is_not_an_escape_but_a_copy_out_is(tmp_path):
    wire = Tripwire([str(tmp_path)], lambda rule, message: None)
    assert wire.classify("shutil.copyfile", ("/usr/lib/x.so", str(tmp_path / "x.so"))) is None
    assert wire.classify("shutil.copyfile", (str(tmp_path / "x.so"), "/usr/lib/x.so"))[0] == "jail-write-outside"
    assert wire.classify("os.rename", ("/etc/hostname", str(tmp_path / "h")))[0] == "jail-write-outside"


def test_paths_through_symlinks_are_judged_where_they_lead(tmp_path):
    (tmp_path / "link").symlink_to("/etc")
    wire = Tripwire([str(tmp_path)], lambda rule, message: None)
    assert not wire.allowed_path(str(tmp_path / "link" / "passwd"))
    assert wire.allowed_path(str(tmp_path / "x" / ".." / "y"))
