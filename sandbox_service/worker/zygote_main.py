"""The template process (fork server): `python -m sandbox_service.worker.zygote_main BACKEND SOCKET_FD`.

It imports torch, Triton and the sandbox's child code once, pays the first-use costs that are safe
before a fork (never the CUDA driver: a process that initialised CUDA cannot give it to a forked
child), and then forks one fresh child per request. Requests arrive on a SOCK_SEQPACKET socket with
the child's three descriptors attached (control pipe, report pipe, output pipe); the template answers
with the child's pid and later reports each child's exit status, since only it can reap them.

The template stays single-threaded: forking a process with other threads can leave locks held forever
in the child. It runs no untrusted code and keeps no state a child could change.
"""

from __future__ import annotations

import ctypes
import json
import os
import select
import signal
import socket
import sys
import tempfile

from sandbox_service import jail
from sandbox_service.jail import privileges as jail_privileges

MAX_REQUEST_BYTES = 1 << 20
_PR_SET_PDEATHSIG = 1
_PR_SET_NAME = 15
# Diagnostics: when the server's environment names a folder here, every one-shot child (candidate, validator,
# Inductor) writes a cProfile of its life to it (benchmarks/sandbox_rl_throughput.py --profile-dir).
PROFILE_ENV = "TRITONRL_PROFILE_DIR"


def die_with_parent() -> None:
    """Ask the kernel to SIGKILL this process when its parent exits (Linux; a no-op elsewhere)."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        pass


def name_process(name: str) -> None:
    """Name this process for ps/top (`trl-judge`, `trl-candidate`...; 15 bytes at most), Linux only."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_NAME, ctypes.c_char_p(name.encode()[:15]), 0, 0, 0)
    except (OSError, AttributeError):
        pass


def _send(sock: socket.socket, message: dict) -> None:
    try:
        sock.send(json.dumps(message).encode())
    except OSError:
        pass  # the server is gone; the loop notices on its next read


def _reap(sock: socket.socket) -> None:
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        _send(sock, {"type": "exit", "pid": pid, "returncode": os.waitstatus_to_exitcode(status)})


def _become_child(request: dict, fds: list[int], profile_dir: str | None) -> int:
    """Runs in the forked child: detach, jail (one-shot roles), rewire descriptors, take the child's
    environment, serve."""
    ctrl_fd, report_fd, output_fd = fds
    os.setsid()
    die_with_parent()
    if request["role"] in jail.UNTRUSTED_ROLES:
        # Still one thread: every later one inherits it. A profile folder (diagnostics, chosen by whoever
        # started the server) is writable too.
        gpu = request["role"] not in jail.GPU_FREE_ROLES
        for problem in jail.confine_files(jail.writable_folders(request["cwd"], request["backend"], profile_dir, gpu),
                                          gpu):
            print(f"sandbox: {problem}", file=sys.stderr)
    name_process(f"trl-{request['role']}")
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.dup2(output_fd, 1)
    os.dup2(output_fd, 2)
    os.close(output_fd)
    # The template holds no descriptor of another child (it closes each child's right after the fork) and
    # its own socket is closed above; what else it has open stays: libraries (NVML) keep state behind them.
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGPIPE):
        signal.signal(signum, signal.SIG_DFL)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    tempfile.tempdir = None  # the template cached its own TMPDIR: a child's temporary files go to its own folder
    from sandbox_service.worker import child_main

    return child_main.serve(request["role"], request["backend"], ctrl_fd, report_fd, int(request["threads"]),
                            profile_dir)


def trusted_import_path() -> None:
    """Keep on sys.path neither the working folder (under the work root, which children of earlier versions
    could write) nor relative entries. The template is started with `python -P` as well, so its working
    folder was never prepended."""
    cwd = os.getcwd()
    sys.path[:] = [p for p in sys.path if p and os.path.isabs(p) and os.path.realpath(p) != os.path.realpath(cwd)]


def main(argv: list[str]) -> int:
    backend, sock_fd = argv[1], int(argv[2])
    die_with_parent()
    jail_privileges.make_undumpable()  # every child inherits it: no process can open another's /proc entries
    trusted_import_path()
    name_process("trl-template")
    profile_dir = os.environ.get(PROFILE_ENV) or None
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the server decides when we stop (it closes the socket)
    sock = socket.socket(fileno=sock_fd)
    from sandbox_service.worker import child_main

    warnings = jail.support().warnings() + child_main.prepare_template(backend)
    child_main.settle_heap()  # before any fork: no child's collections walk (and write) the template's objects
    _send(sock, {"type": "ready", "pid": os.getpid(), "warnings": warnings})
    while True:
        _reap(sock)
        readable, _, _ = select.select([sock], [], [], 0.05)
        if not readable:
            continue
        try:
            data, fds, _, _ = socket.recv_fds(sock, MAX_REQUEST_BYTES, 4)
        except OSError:
            return 0
        if not data:
            return 0  # the server closed its end
        request = json.loads(data)
        if len(fds) != 3:
            for fd in fds:
                os.close(fd)
            _send(sock, {"type": "spawn_failed", "id": request.get("id"), "error": f"expected 3 descriptors, got {len(fds)}"})
            continue
        sys.stdout.flush()
        sys.stderr.flush()
        try:
            pid = os.fork()
        except OSError as exc:
            for fd in fds:
                os.close(fd)
            _send(sock, {"type": "spawn_failed", "id": request["id"], "error": f"fork failed: {exc}"})
            continue
        if pid == 0:
            code = 70
            try:
                sock.close()
                code = _become_child(request, fds, profile_dir)
            except BaseException:  # noqa: BLE001 - a child must never return into the template's loop
                import traceback

                traceback.print_exc()
            finally:
                os._exit(code)
        for fd in fds:
            os.close(fd)
        _send(sock, {"type": "spawned", "id": request["id"], "pid": pid})


if __name__ == "__main__":
    code = main(sys.argv)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)  # skip interpreter teardown (seconds with torch loaded): nothing here needs it
