"""Where a child's CPU goes, stage by stage of one job, read by the server from /proc (nothing the child says):
the DEBUG log's `executor CPU` line, which benchmarks/sandbox_rl_throughput.py sums per evaluation. A stage is
named after the message that ends it (`trial_outputs`: the trials' work, `timing`: the timed batch), and
`between jobs` is what a reused executor spent after its last job (runner.forget_job) until this one. /proc
counts CPU in ticks (10 ms on most kernels), so one stage of one job reads whole ticks: read averages over many jobs."""

from __future__ import annotations

import os

TICK_S = 1.0 / os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 0.01


def cpu_seconds(pid: int) -> float | None:
    """User and system CPU seconds of a process so far, or None when it is gone (or there is no /proc)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:  # bytes: a process's name need not be text
            text = f.read()
        fields = text[text.rindex(b")") + 2:].split()
        return (int(fields[11]) + int(fields[12])) * TICK_S
    except (OSError, ValueError, IndexError):
        return None


class CpuTrace:
    """The CPU a process spent up to each message of a job, summed by message type."""

    def __init__(self, pid: int, since: float | None = None):
        self.pid = pid
        self.last = cpu_seconds(pid)
        self.stages: dict[str, float] = {}
        if since is not None and self.last is not None:
            self.stages["between jobs"] = self.last - since

    def mark(self, stage: str) -> None:
        now = cpu_seconds(self.pid)
        if now is None or self.last is None:
            return
        self.stages[stage] = self.stages.get(stage, 0.0) + now - self.last
        self.last = now

    def summary(self) -> str:
        return ", ".join(f"{stage} {seconds * 1000:.0f}" for stage, seconds in self.stages.items())
