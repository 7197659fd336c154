"""CPU seconds spent by each role of a sandbox server's process tree while a batch runs.

The sandbox names its processes (`trl-template`, `trl-judge`, `trl-builder`, `trl-candidate`...), so a
sampler reading /proc every `interval_s` can add up each role's user+system time; the server process is
`server`. One-shot children live about a second, so their last slice between samples would be lost: the
template reaps them, and its children's time (`cutime`+`cstime`) is the exact total for all of them
(`reaped children`), beside the sampled per-role figures. For the long-lived CUDA roles (THREAD_ROLES) the
time is also split by thread: the main thread (Python, and the driver's calls made from it) as `executor:main
thread`, the others (the CUDA driver's and torch's own) by their names, `executor:cuda-EvtHandlr` say. Linux
only; elsewhere every figure is empty.
"""

from __future__ import annotations

import os
import threading
import time
from collections import defaultdict

TICK_S = 1.0 / os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 0.01
THREAD_ROLES = ("executor", "judge")


def pids() -> list[int]:
    """Every process id in /proc (empty where there is none)."""
    try:
        return [int(entry) for entry in os.listdir("/proc") if entry.isdigit()]
    except OSError:
        return []


def stat_fields(pid: int, tid: int | None = None) -> tuple[str, list[str]] | None:
    """A process's (or, with `tid`, one of its threads') name and the fields of its stat file after the name (state
    first), or None when it is gone. A name need not be UTF-8 (any process may set its own)."""
    path = f"/proc/{pid}/stat" if tid is None else f"/proc/{pid}/task/{tid}/stat"
    try:
        with open(path, errors="replace") as f:
            text = f.read()
    except OSError:
        return None
    return text[text.index("(") + 1: text.rindex(")")], text[text.rindex(")") + 2:].split()


def _cpu_s(fields: list[str]) -> float:
    """User and system CPU seconds from a stat file's fields (stat_fields)."""
    return (float(fields[11]) + float(fields[12])) * TICK_S


def _stat(pid: int) -> tuple[str, int, float, float] | None:
    """(name, parent pid, own CPU s, reaped children's CPU s) of a process, or None when it is gone."""
    found = stat_fields(pid)
    if found is None:
        return None
    name, fields = found
    return name, int(fields[1]), _cpu_s(fields), (float(fields[13]) + float(fields[14])) * TICK_S


def thread_cpu(pid: int) -> dict[int, tuple[str, float]]:
    """Name and CPU seconds of each thread of a process ({thread id: (name, s)}; empty when it is gone)."""
    try:
        tids = [int(entry) for entry in os.listdir(f"/proc/{pid}/task")]
    except OSError:
        return {}
    found = {}
    for tid in tids:
        if (stat := stat_fields(pid, tid)) is not None:
            found[tid] = stat[0], _cpu_s(stat[1])
    return found


def _role(pid: int, name: str, server_pid: int) -> str:
    return "server" if pid == server_pid else name.removeprefix("trl-") if name.startswith("trl-") else "untagged"


def descendants(root: int, parents: dict[int, int]) -> set[int]:
    """`root` and every process below it, from a {pid: parent pid} map."""
    children: dict[int, list[int]] = defaultdict(list)
    for pid, parent in parents.items():
        children[parent].append(pid)
    found, todo = {root}, [root]
    while todo:
        for child in children.get(todo.pop(), ()):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


class RoleCPU:
    """Samples the process tree under `server_pid` until `stop()`: the root is `server`, the sandbox's named
    processes their role (`trl-candidate` -> `candidate`), anything else in the tree `untagged`. Processes
    outside the tree (another server's, say) are not counted."""

    def __init__(self, server_pid: int, interval_s: float = 0.05):
        self.server_pid = server_pid
        self.interval_s = interval_s
        self._first: dict[int, tuple[str, float, float]] = {}
        self._last: dict[int, tuple[str, float, float]] = {}
        self._threads_first: dict[tuple[int, int], float] = {}
        self._threads_last: dict[tuple[int, int], tuple[str, str, float]] = {}
        self._stop = threading.Event()
        self._sample()
        self._first = dict(self._last)
        self._threads_first = {key: cpu for key, (*_, cpu) in self._threads_last.items()}
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._started = time.monotonic()
        self._thread.start()

    def _sample(self) -> None:
        stats = {pid: stat for pid in pids() if (stat := _stat(pid)) is not None}
        tree = descendants(self.server_pid, {pid: stat[1] for pid, stat in stats.items()})
        for pid in tree & stats.keys():
            name, _, own, children = stats[pid]
            self._last[pid] = (name, own, children)
            role = _role(pid, name, self.server_pid)
            if role in THREAD_ROLES:
                for tid, (thread, cpu) in thread_cpu(pid).items():
                    self._threads_last[(pid, tid)] = (role, thread, cpu)

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            self._sample()

    def stop(self) -> dict[str, float]:
        """CPU seconds per role over the sampled window, plus `wall_s` and `reaped children` (exact)."""
        self._stop.set()
        self._thread.join()
        self._sample()
        roles: dict[str, float] = defaultdict(float)
        reaped = 0.0
        for pid, (name, own, children) in self._last.items():
            _, own0, children0 = self._first.get(pid, (name, 0.0, 0.0))
            roles[_role(pid, name, self.server_pid)] += own - own0
            if name == "trl-template":
                reaped += children - children0
        for (pid, tid), (role, thread, cpu) in self._threads_last.items():
            roles[f"{role}:{'main thread' if tid == pid else thread}"] += cpu - self._threads_first.get((pid, tid), 0.0)
        out = {role: round(value, 2) for role, value in sorted(roles.items())}
        out["reaped children"] = round(reaped, 2)
        out["wall_s"] = round(time.monotonic() - self._started, 2)
        return out


def cpu_times() -> tuple[float, float]:
    """(busy, total) jiffies of all cores from /proc/stat (0, 0 where it does not exist)."""
    try:
        with open("/proc/stat") as f:
            fields = [float(v) for v in f.readline().split()[1:]]
    except OSError:
        return 0.0, 0.0
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0.0)
    return sum(fields) - idle, sum(fields)
