"""Undumpable trusted processes: a jailed process cannot open another process's /proc entries (its pipes,
memory, environment), not even as root, whose capabilities the jail drops."""

from __future__ import annotations

import os

from jailed_child import run_jailed

from sandbox_service.jail import privileges


def test_a_jailed_process_cannot_open_an_undumpable_process_s_pipes(tmp_path):
    read_fd, write_fd = os.pipe()
    privileges.make_undumpable()  # this test process stands for the server
    parent = os.getpid()

    def body():
        results = {"caps": privileges.capabilities()}
        for what in (f"/proc/{parent}/fd/{write_fd}", f"/proc/{parent}/environ", f"/proc/{parent}/mem"):
            try:
                open(what, "rb").close()
                results[what] = "opened"
            except PermissionError:
                results[what] = "denied"
        return results

    try:
        outcome = run_jailed(body, str(tmp_path), seal=False)
    finally:
        os.close(read_fd)
        os.close(write_fd)
    assert outcome.returncode == 0, outcome.said
    assert outcome.said.pop("caps") == 0
    outcome.said.pop("problems")
    assert set(outcome.said.values()) == {"denied"}, outcome.said


def test_a_forked_child_inherits_undumpable():
    privileges.make_undumpable()
    assert not privileges.is_dumpable()
    pid = os.fork()
    if pid == 0:
        os._exit(0 if not privileges.is_dumpable() else 1)
    assert os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 0
