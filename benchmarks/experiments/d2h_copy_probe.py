"""One-off probe: what a copy of a run's outputs to pageable host memory costs between timed runs, plain and
inside the sandbox's jail (Landlock before CUDA, seccomp and the tripwire after, as an executor has them).

    python benchmarks/experiments/d2h_copy_probe.py
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import tempfile
import time


def measure(label: str) -> dict:
    import torch

    device = torch.device("cuda")
    x = torch.randn(8, 4096, device=device)
    flush = torch.empty(100 << 18, dtype=torch.int32, device=device)
    host = torch.zeros_like(x, device="cpu")
    dev = torch.empty_like(x)
    out = {}
    for mode in ("none", "device", "host", "host_pinned"):
        buffer = {"device": dev, "host": host, "host_pinned": host.pin_memory(), "none": None}[mode]
        events, gaps, copies = [], [], []
        for i in range(200):
            y = torch.relu(x * 1.5)
            started = time.perf_counter()
            if buffer is not None:
                buffer.copy_(y)
            copies.append(time.perf_counter() - started)
            flush.zero_()
            torch.cuda.synchronize()
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            for _ in range(4):
                y = torch.relu(y * 1.01)
            e.record()
            torch.cuda.synchronize()
            events.append(s.elapsed_time(e) * 1e3)
        out[mode] = {"copy_us": round(statistics.median(copies[20:]) * 1e6, 1),
                     "event_us": round(statistics.median(events[20:]), 1)}
    print(label, json.dumps(out), flush=True)
    return out


def jailed_child() -> None:
    from sandbox_service import jail
    from sandbox_service.jail import privileges

    folder = tempfile.mkdtemp()
    problems = jail.confine_files(jail.writable_folders(folder, "cuda", None, True), True)
    privileges.make_undumpable()
    import torch

    torch.cuda.init()
    torch.zeros(1, device="cuda")
    jail.seal(jail.writable_folders(folder, "cuda", None, True), lambda rule, message: print("tripped", rule, message))
    print("jail problems:", problems, flush=True)
    measure("jailed")


if __name__ == "__main__":
    pid = os.fork()
    if pid == 0:
        try:
            jailed_child()
        finally:
            os._exit(0)
    os.waitpid(pid, 0)
    measure("plain")
    sys.exit(0)
