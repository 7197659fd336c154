"""Helpers for the data-engine tests: run generated tasks directly under the Triton interpreter.

`run_direct` checks many tasks in one child process (TRITON_INTERPRET=1 must be set before triton is
imported, and one torch/triton start-up for all tasks keeps it fast): for the reference's own inputs and
for every input set, it builds Model and ModelNew from the same seed, runs both on two seeds' inputs and
compares them with the sandbox's tolerance. It also reports whether a constant would pass (degenerate
outputs). The full sandbox (static and runtime verifier layers) is exercised separately with
`evaluate_local`, which costs seconds per evaluation.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from jaxrl.data.engine.tasks import GeneratedTask

CHILD = r"""
import importlib.util, json, sys, traceback
import torch
from sandbox_service.correctness import constant_would_pass

def load(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module

def outputs(value):
    return list(value) if isinstance(value, (list, tuple)) else [value]

def check(reference, candidate):
    init = reference.get_init_inputs()
    torch.manual_seed(0)
    model = reference.Model(*init)
    torch.manual_seed(0)
    new = candidate.ModelNew(*init)
    worst, degenerate, values, numel, shapes = 0.0, True, [], 0, []
    for seed in (1, 2):
        torch.manual_seed(seed)
        inputs = reference.get_inputs()
        numel = max([numel] + [t.numel() for t in inputs])
        shapes = [list(t.shape) for t in inputs]
        with torch.no_grad():
            want = outputs(model(*[t.clone() for t in inputs]))
            got = outputs(new(*[t.clone() for t in inputs]))
        for w, g in zip(want, got):
            if w.shape != g.shape or w.dtype != g.dtype:
                return {"ok": False, "error": f"shape/dtype {tuple(g.shape)} {g.dtype} != {tuple(w.shape)} {w.dtype}"}
            if w.is_floating_point():
                if not torch.isfinite(w).all():
                    return {"ok": False, "error": "the reference is not finite"}
                diff = (g.float() - w.float()).abs()
                worst = max(worst, float(diff.max()) if diff.numel() else 0.0)
                if not bool((diff <= 1e-2 + 1e-2 * w.float().abs()).all()):
                    return {"ok": False, "error": f"mismatch, max abs error {float(diff.max()):.3g}"}
                degenerate &= constant_would_pass(w, 1e-2, 1e-2) and w.dim() > 0
                values.append(w.float().flatten()[:4].tolist())
            elif not torch.equal(w, g):
                return {"ok": False, "error": "integer outputs differ"}
            else:
                degenerate = False
    return {"ok": True, "max_abs_error": worst, "degenerate": degenerate, "values": values, "max_numel": numel,
            "shapes": shapes}

results = {}
for job in json.loads(open(sys.argv[1]).read()):
    try:
        candidate = load(job["candidate"], "cand_" + job["key"])
        results[job["key"]] = {name: check(load(path, f"ref_{job['key']}_{name}"), candidate)
                               for name, path in job["references"].items()}
    except Exception:
        results[job["key"]] = {"error": traceback.format_exc()[-2000:]}
print("RESULTS " + json.dumps(results))
"""


def variants(task: GeneratedTask) -> dict[str, str]:
    """The reference and, per input set, the reference with that set's definitions appended."""
    out = {"default": task.code}
    for input_set in task.input_sets:
        out[input_set.name] = task.code + "\n\n" + input_set.source
    return out


def run_direct(tasks: list[GeneratedTask], timeout: float = 600) -> dict[str, dict]:
    """{task_id: {variant: {"ok", "max_abs_error", "degenerate", "max_numel", "shapes"} or {"ok": False, "error"}}}
    from one interpreter child."""
    with tempfile.TemporaryDirectory(prefix="engine-direct-") as root:
        jobs = []
        for index, task in enumerate(tasks):
            folder = Path(root) / f"t{index}"
            folder.mkdir()
            (folder / "candidate.py").write_text(task.solution.code)
            references = {}
            for name, source in variants(task).items():
                (folder / f"ref_{name}.py").write_text(source)
                references[name] = str(folder / f"ref_{name}.py")
            jobs.append({"key": task.task_id, "candidate": str(folder / "candidate.py"), "references": references})
        manifest = Path(root) / "jobs.json"
        manifest.write_text(json.dumps(jobs))
        env = {**os.environ, "TRITON_INTERPRET": "1", "OMP_NUM_THREADS": "1"}
        proc = subprocess.run([sys.executable, "-c", CHILD, str(manifest)], capture_output=True, text=True, env=env,
                              timeout=timeout)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULTS ")]
    assert proc.returncode == 0 and lines, proc.stderr[-4000:]
    return json.loads(lines[-1][len("RESULTS "):])


def failures(results: dict[str, dict]) -> dict[str, object]:
    """The task/variant pairs that did not pass, with their errors."""
    bad = {}
    for key, per_variant in results.items():
        if "error" in per_variant:
            bad[key] = per_variant["error"]
            continue
        for name, result in per_variant.items():
            if not result["ok"]:
                bad[f"{key}/{name}"] = result["error"]
    return bad


def evaluate_many(pairs: list[tuple[str, str]], options, backend: str, workers: int = 2) -> list:
    """Sandbox verdicts for (reference, candidate) pairs, `workers` at a time on one lane whose children
    are started ahead (what `evaluate_local` does one at a time, without the start-up cost each time)."""
    from concurrent.futures import ThreadPoolExecutor

    from sandbox_service.devices import resolve_backend
    from sandbox_service.evaluation import Lane, evaluate

    info = resolve_backend(backend)
    with tempfile.TemporaryDirectory(prefix="engine-eval-") as root:
        gpu = info.gpus[0] if info.gpus else None
        lane = Lane.create(info.backend, gpu, warm=workers, work_root=Path(root))
        try:
            with ThreadPoolExecutor(workers) as pool:
                return list(pool.map(lambda pair: evaluate(pair[0], pair[1], options, lane), pairs))
        finally:
            lane.close()
