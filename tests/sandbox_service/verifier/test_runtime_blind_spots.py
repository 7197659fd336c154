"""Work that used to escape the runtime monitor from inside the candidate's process, and now is caught.

Each hack skips the format and static screens (run_isolated), so the runtime layer is shown to catch it on
its own: on a81bc5d every one of them came back `ok` this way (the static layer catches some, not all).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from sandbox_service.evaluation import run_isolated
from sandbox_service.options import EvalOptions, Policy
from sandbox_service.results import Status
from sandbox_service.verifier.runtime import RuntimeMonitor

CORPUS = Path(__file__).resolve().parents[1] / "corpus"
REPO = Path(__file__).resolve().parents[3]
STRICT = EvalOptions(trials=2, timeout_s=60, memory_limit_mb=4096)
RELAXED = EvalOptions(trials=2, timeout_s=60, memory_limit_mb=4096, policy=Policy.RELAXED)

# (hack, problem, options, the runtime rule that must catch it)
HACKS = [
    ("relu_grid_function_compute", "relu", STRICT, "torch-compute-in-forward"),
    ("relu_grid_lambda_compute", "relu", STRICT, "torch-compute-in-forward"),
    ("relu_pre_run_hook_compute", "relu", STRICT, "torch-compute-in-forward"),
    ("relu_kernel_body_compute", "relu", STRICT, "torch-compute-in-forward"),
    ("relu_thread_compute", "relu", STRICT, "torch-compute-in-forward"),
    ("relu_custom_op_glue_name", "relu", STRICT, "torch-compute-in-forward"),
    ("matmul_custom_op_relaxed", "matmul", RELAXED, "torch-compute-in-forward"),
    ("relu_dispatch_disabled", "relu", STRICT, "monitor-disabled"),
    ("relu_dispatch_disabled", "relu", RELAXED, "monitor-disabled"),
    ("relu_pre_run_hook_numpy", "relu", STRICT, "host-read-in-forward"),
    ("relu_tolist_python", "relu", STRICT, "host-read-in-forward"),
]


def runtime_rules(result) -> set[str]:
    return {v.rule for v in result.violations if v.layer == "runtime"}


@pytest.mark.parametrize(
    "hack, problem, options, rule", HACKS, ids=[f"{h}-{o.policy.value}" for h, _, o, _ in HACKS]
)
def test_hidden_work_is_caught_by_the_runtime_layer(hack, problem, options, rule, in_process_lane):
    reference = (CORPUS / "problems" / f"{problem}.py").read_text()
    result = run_isolated(reference, (CORPUS / "hacks" / f"{hack}.py").read_text(), options, in_process_lane)
    assert result.status == Status.CHEAT, (result.status, result.error)
    assert rule in runtime_rules(result), result.violations


@pytest.mark.parametrize("honest", ["matmul_autotune", "linear_relu_heuristics", "relu_commented"])
@pytest.mark.parametrize("options", [STRICT, RELAXED], ids=["strict", "relaxed"])
def test_honest_launch_callbacks_stay_ok(honest, options, in_process_lane):
    """Autotuning, heuristics and grid lambdas run candidate code during launches; glue there is fine."""
    problem = {"matmul_autotune": "matmul", "linear_relu_heuristics": "linear_relu", "relu_commented": "relu"}[honest]
    reference = (CORPUS / "problems" / f"{problem}.py").read_text()
    result = run_isolated(reference, (CORPUS / "honest" / f"{honest}.py").read_text(), options, in_process_lane)
    assert result.status == Status.OK, (result.status, result.error, result.violations)


TRITON_OP = '''
import torch
import torch.nn as nn
import triton
import triton.language as tl
from torch.library import triton_op, wrap_triton


@triton.jit
def relu_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + i, tl.maximum(tl.load(x_ptr + i, mask=i < n), 0.0), mask=i < n)


@triton_op("honest::relu", mutates_args={})
def relu(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    wrap_triton(relu_kernel)[(triton.cdiv(x.numel(), 256),)](x, out, x.numel(), BLOCK=256)
    return out


class ModelNew(nn.Module):
    def forward(self, x):
        return relu(x)
'''


@pytest.mark.parametrize("options", [STRICT, RELAXED], ids=["strict", "relaxed"])
def test_a_custom_op_is_judged_by_its_body_not_its_name(options, in_process_lane):
    """A triton_op whose body only allocates and launches is honest (its name, `honest::relu`, is no aten glue)."""
    result = run_isolated((CORPUS / "problems" / "relu.py").read_text(), TRITON_OP, options, in_process_lane)
    assert result.status == Status.OK, (result.status, result.error, result.violations)


PROBE = '''
import json, sys, threading
from concurrent.futures import ThreadPoolExecutor
import torch, triton, triton.language as tl
from sandbox_service.verifier.runtime import RuntimeMonitor

monitor = RuntimeMonitor(torch.device("cpu"))
monitor.install()


@triton.jit
def copy_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + i, tl.load(x_ptr + i, mask=i < n), mask=i < n)


def forward(extra):
    x = torch.randn(64)
    out = torch.empty_like(x)
    copy_kernel[lambda meta: (extra(x), triton.cdiv(64, meta["BLOCK"]))[1:]](x, out, 64, BLOCK=32)


def unseen(x):
    with torch.utils._mode_utils.no_dispatch():  # an alias of torch._C._DisableTorchDispatch
        torch.exp(x)


def step_out_of_the_recorder(x):
    recorder = torch.utils._python_dispatch._get_current_dispatch_mode()
    recorder.__exit__(None, None, None)
    torch.exp(x)
    recorder.__enter__()


def in_inference_mode(x):
    with torch.inference_mode():
        torch.erf(x)


class Lazy(torch.Tensor):
    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        with torch._C.DisableTorchFunctionSubclass():
            torch.cos(args[0])
            return func(*args, **(kwargs or {}))


scenarios = {
    "plain": lambda x: None,
    "grid_callable": lambda x: torch.sigmoid(x),
    "thread_pool": lambda x: ThreadPoolExecutor(1).submit(torch.tanh, x).result(),
    "jit_fork": lambda x: torch.jit.wait(torch.jit._fork(torch.abs, x)),
    "inference_mode": in_inference_mode,
    "torch_function": lambda x: x.as_subclass(Lazy).clone(),
    "no_dispatch_alias": unseen,
    "recorder_exited": step_out_of_the_recorder,
}
report = {}
for name, extra in scenarios.items():
    monitor.ops.clear()
    monitor.findings.clear()
    with monitor.forward_scope():
        forward(extra)
    report[name] = {"ops": sorted(monitor.ops), "findings": sorted(v.rule for v in monitor.findings)}
json.dump(report, sys.stdout)
'''


def test_only_the_interpreters_staging_is_exempt_inside_a_launch(tmp_path):
    """A launch's own copies are not recorded; what a callback does during it is, on any thread, in
    inference mode, or from a `__torch_function__` override; a dispatch guard is a finding."""
    (tmp_path / "probe.py").write_text(PROBE)
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, str(tmp_path / "probe.py")], env=env, capture_output=True, text=True,
                          timeout=300, check=True)
    report = json.loads(done.stdout)
    assert report["plain"] == {"ops": ["empty_like", "randn"], "findings": []}  # no new_empty, set_, copy_
    assert "sigmoid" in report["grid_callable"]["ops"]
    assert "tanh" in report["thread_pool"]["ops"]
    assert "abs" in report["jit_fork"]["ops"]
    assert "erf" in report["inference_mode"]["ops"]
    assert "cos" in report["torch_function"]["ops"]
    for hidden in ("no_dispatch_alias", "recorder_exited"):
        assert report[hidden] == {"ops": ["empty_like", "randn"], "findings": ["monitor-disabled"]}


def test_nothing_is_exempt_on_cuda():
    assert RuntimeMonitor(torch.device("cuda"))._staging_file is None
