"""The validator's float32 check: a 16-bit reference is compared with itself in float32 on every seed."""

from __future__ import annotations

import types

import torch

from sandbox_service.worker import validator

CPU = torch.device("cpu")


def _tolerances(dtype: str) -> tuple[float, float]:
    return (1e-2, 1e-2)


class _Cancelling(torch.nn.Module):
    """(a * scale + b) - a * scale: exact enough in float32, only a few bits of b left in float16 at scale 1000."""

    def forward(self, a, b, scale):
        big = a * scale
        return (big + b) - big


def _inputs():
    scale = 1000.0 if torch.initial_seed() == 2 else 1.0  # seed 2's inputs are the ill-conditioned ones
    return [torch.randn(64, 256).half(), torch.randn(64, 256).half(), scale]


PROBLEM = types.SimpleNamespace(get_inputs=_inputs)


def test_every_seed_of_the_validation_is_compared_with_float32():
    assert validator._float32_drift(_Cancelling(), PROBLEM, [1], CPU, _tolerances, 0) == ""
    drift = validator._float32_drift(_Cancelling(), PROBLEM, [1, 2], CPU, _tolerances, 0)
    assert drift.startswith("output 0 (float16) for seed 2 is not within atol=0.01 rtol=0.01"), drift


def test_references_too_large_to_copy_are_judged_in_their_own_precision():
    too_large = validator.FLOAT32_CHECK_MAX_BYTES + 1
    assert validator._float32_drift(_Cancelling(), PROBLEM, [2], CPU, _tolerances, too_large) == ""
