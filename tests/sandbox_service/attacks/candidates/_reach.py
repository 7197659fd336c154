# ---- shared attack helpers (inlined by attack_support.candidate) ----
def _attempted(what):
    """Tell the test the attack's code ran, on stdout (the test reads the evaluation's stdout tail, which no
    verdict reads; a jailed candidate can write no file outside its own folder). First thing: a sandbox that
    blocks the attack must still see it."""
    print(f"attempted-{what}", flush=True)


def _harness_frame():
    """The candidate runner's frame (candidate_runner.run): its locals hold emit, control, monitor, job, sets."""
    import sys

    frame = sys._getframe()
    while frame is not None:
        if {"emit", "monitor", "job", "control"} <= set(frame.f_locals):
            return frame
        frame = frame.f_back
    raise RuntimeError("candidate_runner.run's frame not found")


SIBLINGS = ("trl-candidate", "trl-tracer", "trl-executor")  # the lane's untrusted processes, either design


def _name_and_record(name):
    """Name this process `name` (`atk-...`: the test finds what is still alive by that name in /proc)."""
    import ctypes

    ctypes.CDLL(None).prctl(15, ctypes.c_char_p(name.encode()[:15]), 0, 0, 0)


def _detached(body):
    """Run body() in a grandchild in a new session (setsid + double fork): outside the candidate's process group.
    Returns at once in the caller."""
    import os

    pid = os.fork()
    if pid == 0:
        try:
            os.setsid()
            if os.fork() == 0:
                try:
                    body()
                finally:
                    os._exit(0)
        finally:
            os._exit(0)
    os.waitpid(pid, 0)


def _processes(comm, same_parent=True):
    """pids of processes named `comm` (trl-judge, trl-candidate...; or any of a tuple of names) forked by this
    lane's template (our parent)."""
    import os

    template = os.getppid()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            stat = open(f"/proc/{entry}/stat").read()
        except OSError:
            continue
        name = stat[stat.index("(") + 1: stat.rindex(")")]
        ppid = int(stat[stat.rindex(")") + 2:].split()[1])
        if (name == comm if isinstance(comm, str) else name in comm) and (ppid == template or not same_parent):
            found.append(int(entry))
    return found


def _pipe_ends(pid):
    """(read ends, write ends) of the pipes process `pid` holds, skipping stdin/stdout/stderr and its output pipe."""
    import os

    reads, writes = [], []
    output = None
    try:
        output = os.readlink(f"/proc/{pid}/fd/1")
    except OSError:
        pass
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
            flags = int(open(f"/proc/{pid}/fdinfo/{fd}").read().split("flags:")[1].split()[0], 8)
        except (OSError, IndexError, ValueError):
            continue
        if not target.startswith("pipe:") or int(fd) <= 2 or target == output:
            continue
        (writes if flags & 3 == os.O_WRONLY else reads).append(int(fd))
    return reads, writes


def _frame(message):
    import json
    import struct

    data = json.dumps(message).encode()
    return struct.pack(">I", len(data)) + data
# ---- end of shared attack helpers ----
