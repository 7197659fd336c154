"""Shared sources and options for the sandbox tests."""

from __future__ import annotations

from pathlib import Path

from sandbox_service.cli import EXAMPLES
from sandbox_service.options import EvalOptions

FIXTURES = Path(__file__).resolve().parent / "fixtures"


def example(name: str) -> str:
    return (EXAMPLES / f"{name}.py").read_text()


def fixture_candidate(name: str) -> str:
    return (FIXTURES / "candidates" / f"{name}.py").read_text()


REFERENCE = example("scaled_add_reference")
CORRECT = example("scaled_add_correct")
INCORRECT = example("scaled_add_incorrect")
CHEAT = example("scaled_add_cheat")

# Two trials keep the interpreter tests quick; the protocol's default (5) is tested in test_options.
FAST = EvalOptions(trials=2, timeout_s=60, memory_limit_mb=4096)


HALF_REFERENCE = """import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, a, b):
{body}


def get_inputs():
    return [torch.randn(64, 256, dtype=torch.{dtype}), torch.randn(64, 256, dtype=torch.{dtype})]


def get_init_inputs():
    return []
"""
# a + b - a at a thousand times the scale: in 16 bits the large term leaves b only a few bits; in float32, all
CANCELLING = "        big = a * 1000.0\n        return (big + b) - big"

