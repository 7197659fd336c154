"""One-off survey: where the executor's timed batch spends its time, per call, on RL-sized candidates.

For a few candidates of benchmarks/rl_problems.py (traced as the tracer traces them, replayed in this process on
the GPU), the wall time of a whole batch (3 warm-up and 100 timed calls) done four ways:
- `executor`: runner._time_checked as the executor runs it (fresh inputs, a sample of every call's outputs
  copied to pageable host memory, 3 checked runs);
- `fresh`: fresh inputs for every run, no samples;
- `same`: the same inputs every run (the in-process design's protocol);
and each part of one call alone (inputs, the L2 flush with its synchronisation, the call, the sample copy),
each followed by a synchronisation, median over the calls. With `--jail`, the batches are timed again after
the process seals itself as an executor does (seccomp filter and tripwire: sandbox_service.jail.seal).

    python benchmarks/experiments/timed_batch_breakdown.py [--jail]
"""

from __future__ import annotations

import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
for path in (REPO_ROOT, REPO_ROOT / "benchmarks"):
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))

from replay_overhead import traced  # noqa: E402
from rl_problems import cases  # noqa: E402


def main() -> None:
    import argparse

    import torch

    parser = argparse.ArgumentParser()
    parser.add_argument("--jail", action="store_true")
    args = parser.parse_args()

    from sandbox_service import timing
    from sandbox_service.executor import kernels as kernel_module
    from sandbox_service.executor import runner
    from sandbox_service.executor.replay import Replay
    from sandbox_service.lane import _device_properties
    from sandbox_service.options import Policy
    from sandbox_service.worker import harness

    device = torch.device("cuda")
    properties = _device_properties("cuda", 0)
    wanted = {("relu", 0), ("softmax", 1), ("matmul", 2), ("row_sum", 3)}
    rows = []
    batches = []  # (row, its batch functions): timed again once sealed (--jail)

    def measure(index: int, case, folder: Path, program: dict) -> dict:
        """One candidate's batches, in its own scope (its functions are timed again once sealed)."""
        reference = harness.load_module(folder / "reference.py", f"reference_{index}")
        module = kernel_module.load_kernels(program["kernels"], folder, f"kernels_{index}")
        replay = Replay(program["sets"][0], module, {}, device, Policy.STRICT)
        job = {"trials": 5, "max_timing_checks": 3, "timing_runs": 100, "warmup_runs": 3, "trial_key": "k" * 32,
               "outputs_dir": str(folder), "ipc_min_bytes": None}
        sent = []

        def emit(kind, **fields):
            sent.append(kind)

        class Control:
            def receive(self, timeout=None):
                return {"type": "continue"}

        def executor_batch() -> float:
            inputs = runner.timing_inputs(job, reference, 11, device)
            started = time.perf_counter()
            runner._time_checked(job, emit, Control(), replay, inputs, [(5, 1), (50, 2), (90, 3)],
                                 calibrate=False, sample_seed=1234)
            return time.perf_counter() - started

        def fresh_batch() -> float:
            made = runner.timing_inputs(job, reference, 12, device)
            current = {}

            def before(i):
                current.pop("x", None)
                current["x"] = made(i)

            started = time.perf_counter()
            timing.time_cuda(lambda: replay.run(current["x"]), warmup=3, runs=100, method=timing.CUDA_EVENTS,
                             before_run=before)
            return time.perf_counter() - started

        same_inputs = harness.trial_inputs(reference, 5, device)

        def same_batch() -> float:
            started = time.perf_counter()
            timing.time_cuda(lambda: replay.run(same_inputs), warmup=3, runs=100, method=timing.CUDA_EVENTS)
            return time.perf_counter() - started

        for fn in (executor_batch, fresh_batch, same_batch):
            fn()  # compilation and first allocations outside every figure
        row = {"case": f"{case.problem}/{case.variant}"}
        for name, fn in (("executor", executor_batch), ("fresh", fresh_batch), ("same", same_batch)):
            row[f"{name}_batch_ms"] = statistics.median(fn() for _ in range(5)) * 1e3
        batches.append((row, {"executor": executor_batch, "fresh": fresh_batch, "same": same_batch}))

        # Each part alone, synchronised after it.
        flush = torch.empty(timing.l2_flush_bytes() // 4, dtype=torch.int32, device=device)
        made = runner.timing_inputs(job, reference, 13, device)
        parts: dict[str, list[float]] = {k: [] for k in ("inputs", "flush", "call", "sample", "seed", "get_inputs")}
        buffers = None
        for i in range(100):
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            made.ready.clear()
            x = made(i)
            torch.cuda.synchronize()
            t1 = time.perf_counter()
            flush.zero_()
            torch.cuda.synchronize()
            t2 = time.perf_counter()
            out = replay.run(x)
            torch.cuda.synchronize()
            t3 = time.perf_counter()
            flat = [t.reshape(-1) for t in out]
            picked = harness.sample_indices([t.numel() for t in flat], 1000 + i)
            samples = [t[p.to(t.device)] for t, p in zip(flat, picked)]
            if buffers is None:
                buffers = [torch.zeros_like(s, device="cpu") for s in samples]
            for b, s in zip(buffers, samples):
                b.copy_(s)
            t4 = time.perf_counter()
            harness.seed_everything(77 + i)
            t5 = time.perf_counter()
            with torch.device(device):
                reference.get_inputs()
            torch.cuda.synchronize()
            t6 = time.perf_counter()
            for key, value in zip(parts, (t1 - t0, t2 - t1, t3 - t2, t4 - t3, t5 - t4, t6 - t5)):
                parts[key].append(value * 1e6)
        row.update({f"{k}_us": round(statistics.median(v), 1) for k, v in parts.items()})
        print(json.dumps(row), flush=True)
        return row

    with tempfile.TemporaryDirectory(prefix="tritonrl-breakdown-") as tmp:
        chosen = [c for c in cases("gpu") if (c.problem, c.variant) in wanted]
        programs = []
        for case in chosen:  # all traced first: a sealed process starts no other
            programs.append(traced(Path(tmp), case, properties))
        for index, (case, (folder, program)) in enumerate(zip(chosen, programs)):
            rows.append(measure(index, case, folder, program))
        if args.jail:  # everything is compiled by now: a sealed process starts no compiler
            from sandbox_service import jail

            jail.seal([tmp, "/dev/shm"], lambda rule, message: print("jail:", rule, message))
            for row, functions in batches:
                for name, fn in functions.items():
                    row[f"{name}_batch_sealed_ms"] = statistics.median(fn() for _ in range(5)) * 1e3
                print(json.dumps({k: v for k, v in row.items() if "batch" in k}), flush=True)
    print(json.dumps({"device": torch.cuda.get_device_name(), "rows": rows}))


if __name__ == "__main__":
    main()
