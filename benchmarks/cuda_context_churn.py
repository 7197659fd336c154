"""How fast can fresh processes get (and give back) a CUDA context on one GPU?

The sandbox gives every candidate a fresh process (forked from a template that imported torch), so
evaluations per minute are bounded by how many CUDA contexts the driver creates and destroys per second.
This forks `--count` children per concurrency level; each creates its context (torch.cuda.init, one
allocation, a synchronize), then does one kind of `--work` an evaluation does, optionally launches one small
Triton kernel from a private cache, and exits. Printed per level and work: contexts per second, and the
median time to create a context, to do the work and to exit. Work that lowers the rate costs the driver
time it spends for the whole GPU (every process waits), not only for the process that asked:
- none: the context alone;
- d2h / h2d: one small copy to the host (into pageable memory) / to the device;
- pinned: one small page-locked host allocation;
- ops: the tensor operations of the sandbox's fingerprints and runtime checks, results left on the device.

    python benchmarks/cuda_context_churn.py --count 32 --levels 1,4,16 --work none,d2h,ops

With `--timer`, a separate process times a memory-bound kernel (the sandbox's timing function, 100 runs a
round) all along, and each run reports the rounds timed while it went on next to the rounds timed idle:
whether a context being made, or a child's small kernels, disturb a timed kernel in another process.

Children get the sandbox's CUDA work queues per context (`--connections`, as the sandbox's children:
sandbox_service/worker/process.py; 0 = the driver's default).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from sandbox_service.worker.process import CUDA_CONNECTIONS  # noqa: E402 - after the path is set

KERNEL = """
import triton, triton.language as tl
@triton.jit
def k(x_ptr, n, BLOCK: tl.constexpr):
    o = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(x_ptr + o, tl.load(x_ptr + o, mask=o < n) * {c}, mask=o < n)
"""


WORKS = ("none", "d2h", "h2d", "pinned", "ops")


def do_work(work: str, x) -> None:
    import torch

    if work == "d2h":
        x[:16].cpu()
    elif work == "h2d":
        torch.arange(16, dtype=torch.float32).to(x.device)
    elif work == "pinned":
        torch.empty(16, pin_memory=True)
    elif work == "ops":
        y = torch.randn(x.shape, device=x.device)
        nan_x, nan_y = torch.isnan(x), torch.isnan(y)
        differs = (nan_x != nan_y).any() | (x.masked_fill(nan_x, 0) != y.masked_fill(nan_y, 0)).any()
        sample = torch.cat([x[::64].to(torch.float64), y.clone()[::64].to(torch.float64)])
        torch.stack([differs.reshape(()), sample.sum() > 0])
    torch.cuda.synchronize()


def child(index: int, write_fd: int, triton_kernel: bool, work: str) -> None:
    import torch

    started = time.monotonic()
    torch.cuda.init()
    x = torch.ones(1 << 16, device="cuda")
    torch.cuda.synchronize()
    context_s = time.monotonic() - started
    t = time.monotonic()
    do_work(work, x)
    work_s = time.monotonic() - t
    kernel_s = 0.0
    if triton_kernel:
        import importlib.util

        folder = tempfile.mkdtemp(prefix="churn-")
        os.environ["TRITON_CACHE_DIR"] = folder
        path = os.path.join(folder, f"k{index}.py")
        with open(path, "w") as f:
            f.write(KERNEL.format(c=float(index + 2)))
        spec = importlib.util.spec_from_file_location(f"k{index}", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        t = time.monotonic()
        module.k[(1,)](x, x.numel(), BLOCK=1024)
        torch.cuda.synchronize()
        kernel_s = time.monotonic() - t
    row = {"context_s": context_s, "work_s": work_s, "kernel_s": kernel_s}
    os.write(write_fd, (json.dumps(row) + "\n").encode())


def timer_child() -> None:
    """Print one line per round of 100 timed runs of a ~50 us kernel: its monotonic end time and stats."""
    import torch

    from sandbox_service import timing

    x = torch.randn(1 << 24, device="cuda")
    while True:
        stats = timing.time_cuda(lambda: x.mul(2.0), warmup=5, runs=100, method=timing.CUDA_EVENTS)
        print(json.dumps({"t": time.monotonic(), "median_us": stats.median_us, "mean_us": stats.mean_us}), flush=True)


class Timer:
    """The timer process, and the rounds it timed within given windows of time."""

    def __init__(self):
        self.lines: list[str] = []
        self.process = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--timer-child"],
                                        stdout=subprocess.PIPE, text=True)
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()
        while len(self.lines) < 5:  # CUDA ready and warm
            if self.process.poll() is not None:
                raise RuntimeError("the timer process failed")
            time.sleep(0.1)

    def _read(self) -> None:
        for line in self.process.stdout:
            self.lines.append(line)

    def rounds(self, start: float, end: float) -> dict:
        rows = [json.loads(line) for line in list(self.lines)]
        inside = [r for r in rows if start < r["t"] <= end]
        medians = [r["median_us"] for r in inside]
        return {
            "rounds": len(inside),
            "median_of_medians_us": round(statistics.median(medians), 2) if medians else None,
            "max_median_us": round(max(medians), 2) if medians else None,
            "mean_of_means_us": round(statistics.fmean(r["mean_us"] for r in inside), 2) if inside else None,
        }

    def close(self) -> None:
        self.process.kill()
        self.process.wait()


def level(count: int, concurrency: int, triton_kernel: bool, work: str) -> dict:
    read_fd, write_fd = os.pipe()
    running: dict[int, float] = {}
    exits: list[float] = []
    started = time.monotonic()
    launched = 0
    while launched < count or running:
        while launched < count and len(running) < concurrency:
            pid = os.fork()
            if pid == 0:
                code = 1
                try:
                    os.close(read_fd)
                    child(launched, write_fd, triton_kernel, work)
                    code = 0
                finally:
                    os._exit(code)
            running[pid] = time.monotonic()
            launched += 1
        pid, _ = os.waitpid(-1, 0)
        if pid in running:  # not the timer process
            exits.append(time.monotonic() - running.pop(pid))
    wall = time.monotonic() - started
    os.close(write_fd)
    data = b""
    while chunk := os.read(read_fd, 1 << 16):
        data += chunk
    os.close(read_fd)
    rows = [json.loads(line) for line in data.decode().splitlines()]

    def median(key: str) -> float | None:
        return round(statistics.median(r[key] for r in rows), 4) if rows else None

    return {
        "concurrency": concurrency, "work": work, "count": count, "ok": len(rows), "wall_s": round(wall, 3),
        "per_second": round(count / wall, 2), "median_context_s": median("context_s"),
        "median_work_s": median("work_s"), "median_kernel_s": median("kernel_s"),
        "median_lifetime_s": round(statistics.median(exits), 4),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=32)
    parser.add_argument("--levels", default="1,4,16")
    parser.add_argument("--work", default="none", help=f"comma-separated, each a run per level: {', '.join(WORKS)}")
    parser.add_argument("--triton", action="store_true", help="also compile and launch one Triton kernel each")
    parser.add_argument("--connections", default=CUDA_CONNECTIONS,
                        help="CUDA_DEVICE_MAX_CONNECTIONS of the children (default: the sandbox's; 0: the driver's)")
    parser.add_argument("--timer", action="store_true", help="time a kernel in another process all along")
    parser.add_argument("--timer-child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--out")
    args = parser.parse_args(argv)
    if args.timer_child:
        timer_child()
        return 0
    works = args.work.split(",")
    if unknown := [w for w in works if w not in WORKS]:
        parser.error(f"unknown --work {unknown}; choose from {', '.join(WORKS)}")
    os.environ["PYTORCH_NVML_BASED_CUDA_CHECK"] = "1"
    os.environ.pop("CUDA_DEVICE_MAX_CONNECTIONS", None)
    if args.connections != "0":
        os.environ["CUDA_DEVICE_MAX_CONNECTIONS"] = args.connections
    import torch  # noqa: F401 - imported once, before the forks, never initialising CUDA here
    import triton  # noqa: F401

    timer = Timer() if args.timer else None
    results = []
    try:
        if timer:
            time.sleep(3.0)
            idle = {"concurrency": 0, "work": "idle", "timer": timer.rounds(time.monotonic() - 3.0, time.monotonic())}
            results.append(idle)
            print(json.dumps(idle), flush=True)
        for concurrency in (int(v) for v in args.levels.split(",")):
            for work in works:
                started = time.monotonic()
                result = level(args.count, concurrency, args.triton, work)
                if timer:
                    result["timer"] = timer.rounds(started, time.monotonic())
                results.append(result)
                print(json.dumps(result), flush=True)
    finally:
        if timer:
            timer.close()
    if args.out:
        with open(args.out, "w") as f:
            json.dump(results, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
