"""On a CUDA GPU (the device machine): Inductor's CUDA kernels as a standalone module, verified and timed.

Run there with `python -m pytest -m gpu tests/sandbox_service/inductor/test_inductor_gpu.py`.
"""

from __future__ import annotations

import pytest

from sandbox_service.evaluation import evaluate
from sandbox_service.inductor.request import compile_with_inductor
from sandbox_service.options import CandidateFormat, EvalOptions, InductorOptions, InputSet
from sandbox_service.results import InductorStatus, Status

pytestmark = pytest.mark.gpu

FUSED_NORM = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.norm = nn.LayerNorm(features)

    def forward(self, x, y):
        return torch.nn.functional.gelu(self.norm(x) * 2.0 + y)


def get_inputs():
    return [torch.randn(16384, 1024), torch.randn(16384, 1024)]


def get_init_inputs():
    return [1024]
"""
OTHER_ROWS = InputSet("rows", "def get_inputs():\n    return [torch.randn(6143, 1024), torch.randn(6143, 1024)]\n")


def test_an_inductor_module_keeps_libdevice_and_passes_the_strict_verifier_with_timing(gpu_lane):
    made = compile_with_inductor(FUSED_NORM, InductorOptions(), gpu_lane)
    assert made.status == InductorStatus.OK, made.reason
    assert made.device and "cpu" not in made.device
    assert "torch._inductor" not in made.source and "extern_kernels" not in made.source
    assert "@triton.jit" in made.source and made.kernels >= 1
    options = EvalOptions(trials=3, timing_runs=50, candidate_format=CandidateFormat.CODE)
    result = evaluate(FUSED_NORM, made.source, options, gpu_lane, input_sets=(OTHER_ROWS,))
    assert result.status == Status.OK, (result.error, result.violations)
    assert result.speedup is not None and result.candidate_time_us > 0
    # one fused pass over 64 MB tensors against eager's four (layer norm, scale, add, GELU): clearly faster
    assert result.speedup > 1.0, result.speedup
