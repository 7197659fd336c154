"""A reference's memory needs are estimated on the meta device, before it may touch the GPU."""

from __future__ import annotations

import types
from types import SimpleNamespace

import pytest

from sandbox_service.lane import Lane
from sandbox_service.worker.pool import MemoryBudget
from sandbox_service.worker.sizing import estimate_bytes

REFERENCE = '''
import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.fc = nn.Linear(n, n)

    def forward(self, x):
        return torch.softmax(self.fc(x), dim=-1) * 2.0

def get_inputs():
    return [torch.randn(1024, 256)]

def get_init_inputs():
    return [256]
'''


def module_of(source: str) -> types.ModuleType:
    module = types.ModuleType("reference_under_test")
    exec(compile(source, "<reference>", "exec"), module.__dict__)  # noqa: S102 - test input
    return module


def test_the_estimate_covers_parameters_inputs_intermediates_and_outputs():
    parameters = 4 * (256 * 256 + 256)
    one_activation = 4 * 1024 * 256
    estimate = estimate_bytes(module_of(REFERENCE))
    # input, linear output, softmax output, scaled output: every tensor created, none freed
    assert estimate >= parameters + 4 * one_activation
    assert estimate <= parameters + 8 * one_activation


def test_the_estimate_grows_with_the_inputs():
    small = estimate_bytes(module_of(REFERENCE))
    large = estimate_bytes(module_of(REFERENCE.replace("randn(1024, 256)", "randn(8192, 256)")))
    assert large > 7 * (small - 4 * (256 * 256 + 256))


@pytest.mark.parametrize("change", [
    ("torch.randn(1024, 256)", "torch.randn(1024, 256, device='cpu')"),  # an explicit device
    ("* 2.0", "* x.sum().item()"),  # a value read back
    ("torch.randn(1024, 256)", "torch.randn(1024, 256).cpu()"),  # a copy to a real device
    ("return [256]", "raise RuntimeError('broken')"),  # a reference that raises
])
def test_what_does_not_run_on_meta_has_no_estimate(change):
    assert estimate_bytes(module_of(REFERENCE.replace(*change))) is None


def test_a_lane_holds_the_estimate_with_room_to_spare_and_never_more_than_half():
    lane = SimpleNamespace(backend="cuda", memory=MemoryBudget(80 << 30))
    assert Lane.reference_bytes(lane, None) == 40 << 30
    assert Lane.reference_bytes(lane, 100 << 20) == 150 << 20  # beside the context, held for the process
    assert Lane.reference_bytes(lane, 70 << 30) == 40 << 30
    assert Lane.reference_bytes(SimpleNamespace(backend="interpreter", memory=None), 100 << 20) == 0
