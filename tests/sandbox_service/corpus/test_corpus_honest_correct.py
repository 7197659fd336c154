"""The corpus's honest kernels are correct, and its constant-output hacks really do pass a loose tolerance.

Both run under the Triton interpreter (TRITON_INTERPRET=1, CPU) in one child process, since the
variable must be set before triton is imported. The full pipeline over the whole corpus is tested
elsewhere; this keeps the corpus itself honest.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import yaml

CORPUS = Path(__file__).resolve().parent
MANIFEST = yaml.safe_load((CORPUS / "manifest.yaml").read_text())["candidates"]

CHILD = r"""
import importlib.util, json, os, sys
import torch

def load(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module

results = {}
for index, (problem_path, candidate_path) in enumerate(json.loads(sys.argv[1])):
    problem = load(problem_path, f"problem_{index}")
    candidate = load(candidate_path, f"candidate_{index}")
    init = problem.get_init_inputs()
    torch.manual_seed(0)
    reference = problem.Model(*init)
    torch.manual_seed(0)
    model = candidate.ModelNew(*init)
    worst, close = 0.0, True
    for seed in (1, 2):
        torch.manual_seed(seed)
        inputs = problem.get_inputs()
        expected = reference(*[t.clone() for t in inputs])
        got = model(*[t.clone() for t in inputs])
        assert got.shape == expected.shape and got.dtype == expected.dtype, candidate_path
        worst = max(worst, (got - expected).abs().max().item())
        close &= torch.allclose(got, expected, atol=1e-2, rtol=1e-2)
    results[candidate_path] = {"max_abs_error": worst, "allclose_1e-2": bool(close)}
print(json.dumps(results))
"""


def run_under_interpreter(entries: list[dict]) -> dict[str, dict]:
    pairs = [(str(CORPUS / e["problem"]), str(CORPUS / e["file"])) for e in entries]
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    proc = subprocess.run([sys.executable, "-c", CHILD, json.dumps(pairs)], capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = json.loads(proc.stdout.strip().splitlines()[-1])
    return {str(Path(path).relative_to(CORPUS)): result for path, result in results.items()}


def test_honest_kernels_are_correct_and_constant_outputs_pass_a_loose_tolerance():
    honest = [e for e in MANIFEST if e["expected_status"] == "ok"]
    constant = [e for e in MANIFEST if e["category"] == "constant-output"]
    assert honest and constant
    results = run_under_interpreter(honest + constant)
    for entry in honest:
        assert results[entry["file"]]["max_abs_error"] < 1e-4, (entry["file"], results[entry["file"]])
    # The hack works against allclose alone: only a degenerate-reference check can refuse it.
    for entry in constant:
        assert results[entry["file"]]["allclose_1e-2"], (entry["file"], results[entry["file"]])
        assert results[entry["file"]]["max_abs_error"] > 1e-4, entry["file"]
