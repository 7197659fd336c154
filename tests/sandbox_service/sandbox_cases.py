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
