"""The seccomp filter: a jailed process keeps its threads and its own signals, and dies of SIGSYS on any
attempt to start a process, exec, reach another process or open a network socket."""

from __future__ import annotations

import ctypes
import os
import socket
import threading

from jailed_child import run_jailed

from sandbox_service.jail import seccomp

libc = ctypes.CDLL(None, use_errno=True)


def test_threads_signals_to_itself_and_unix_sockets_still_work(tmp_path):
    def body():
        seen = []
        thread = threading.Thread(target=lambda: seen.append("thread"))
        thread.start()
        thread.join()
        os.kill(os.getpid(), 0)
        a, b = socket.socketpair(socket.AF_UNIX)
        a.send(b"x")
        return {"seen": seen, "unix": b.recv(1).decode()}

    outcome = run_jailed(body, str(tmp_path))
    assert outcome.returncode == 0, outcome.said
    assert outcome.said["seen"] == ["thread"] and outcome.said["unix"] == "x"


def test_fork_through_libc_kills_the_process(tmp_path):
    outcome = run_jailed(lambda: {"pid": libc.fork()}, str(tmp_path))
    assert outcome.killed_by_seccomp, outcome


def test_exec_through_libc_kills_the_process(tmp_path):
    outcome = run_jailed(lambda: {"rc": libc.execv(b"/bin/true", None)}, str(tmp_path))
    assert outcome.killed_by_seccomp, outcome


def test_signal_to_another_process_through_libc_kills_the_process(tmp_path):
    parent = os.getpid()
    outcome = run_jailed(lambda: {"rc": libc.kill(parent, 0)}, str(tmp_path))
    assert outcome.killed_by_seccomp, outcome


def test_ptrace_and_process_vm_readv_kill_the_process(tmp_path):
    parent = os.getpid()
    for call in (lambda: libc.ptrace(16, parent, 0, 0), lambda: libc.syscall(310, parent, 0, 0, 0, 0, 0)):
        outcome = run_jailed(lambda: {"rc": call()}, str(tmp_path))
        assert outcome.killed_by_seccomp, outcome


def test_a_network_socket_through_libc_kills_the_process(tmp_path):
    outcome = run_jailed(lambda: {"fd": libc.socket(socket.AF_INET, socket.SOCK_STREAM, 0)}, str(tmp_path))
    assert outcome.killed_by_seccomp, outcome


def test_clone3_answers_enosys_so_threads_fall_back_to_clone(tmp_path):
    outcome = run_jailed(lambda: {"rc": libc.syscall(435, 0, 0), "errno": ctypes.get_errno()}, str(tmp_path))
    assert outcome.returncode == 0 and outcome.said["rc"] == -1 and outcome.said["errno"] == 38, outcome


def test_the_program_denies_every_listed_call_and_fits_classic_bpf():
    program = seccomp.build_program(1234)
    assert len(program) % 8 == 0 and len(program) // 8 < 4096
    assert set(seccomp.DENIED) <= set(seccomp.X86_64)
