"""How fast can fresh processes get (and give back) a CUDA context on one GPU?

The sandbox gives every candidate a fresh process (forked from a template that imported torch), so
evaluations per minute are bounded by how many CUDA contexts the driver creates and destroys per second.
This forks `--count` children per concurrency level; each creates its context (torch.cuda.init, one
allocation, a synchronize), optionally launches one small Triton kernel from a private cache, and exits.
Printed per level: contexts per second, and the median time to create a context and to exit.

    python benchmarks/cuda_context_churn.py --count 32 --levels 1,4,16
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time

KERNEL = """
import triton, triton.language as tl
@triton.jit
def k(x_ptr, n, BLOCK: tl.constexpr):
    o = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(x_ptr + o, tl.load(x_ptr + o, mask=o < n) * {c}, mask=o < n)
"""


def child(index: int, write_fd: int, triton_kernel: bool) -> None:
    import torch

    started = time.monotonic()
    torch.cuda.init()
    x = torch.ones(1 << 16, device="cuda")
    torch.cuda.synchronize()
    context_s = time.monotonic() - started
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
    os.write(write_fd, (json.dumps({"context_s": context_s, "kernel_s": kernel_s}) + "\n").encode())


def level(count: int, concurrency: int, triton_kernel: bool) -> dict:
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
                    child(launched, write_fd, triton_kernel)
                    code = 0
                finally:
                    os._exit(code)
            running[pid] = time.monotonic()
            launched += 1
        pid, _ = os.waitpid(-1, 0)
        exits.append(time.monotonic() - running.pop(pid))
    wall = time.monotonic() - started
    os.close(write_fd)
    data = b""
    while chunk := os.read(read_fd, 1 << 16):
        data += chunk
    os.close(read_fd)
    rows = [json.loads(line) for line in data.decode().splitlines()]
    return {
        "concurrency": concurrency, "count": count, "ok": len(rows), "wall_s": round(wall, 3),
        "per_second": round(count / wall, 2),
        "median_context_s": round(statistics.median(r["context_s"] for r in rows), 4) if rows else None,
        "median_kernel_s": round(statistics.median(r["kernel_s"] for r in rows), 4) if rows else None,
        "median_lifetime_s": round(statistics.median(exits), 4),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=32)
    parser.add_argument("--levels", default="1,4,16")
    parser.add_argument("--triton", action="store_true", help="also compile and launch one Triton kernel each")
    parser.add_argument("--out")
    args = parser.parse_args(argv)
    os.environ["PYTORCH_NVML_BASED_CUDA_CHECK"] = "1"
    import torch  # noqa: F401 - imported once, before the forks, never initialising CUDA here
    import triton  # noqa: F401

    results = []
    for concurrency in (int(v) for v in args.levels.split(",")):
        result = level(args.count, concurrency, args.triton)
        results.append(result)
        print(json.dumps(result), flush=True)
    if args.out:
        with open(args.out, "w") as f:
            json.dump(results, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
