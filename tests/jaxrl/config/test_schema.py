"""Section value checks: every range error names the key, the allowed range and the value given."""

from __future__ import annotations

import pytest

from jaxrl.config.schema import (
    CheckpointSection,
    ConfigError,
    EvalSection,
    GRPOSection,
    OptimSection,
    SamplingSection,
    SandboxSection,
    SFTSection,
)

NAN = float("nan")


@pytest.mark.parametrize(
    "section, values, message",
    [
        (SamplingSection, {"temperature": -0.5}, "temperature must be >= 0, got -0.5"),
        (SamplingSection, {"temperature": NAN}, "temperature must be >= 0, got nan"),
        (SamplingSection, {"top_p": 0}, "top_p must be in (0, 1], got 0.0"),
        (SamplingSection, {"top_k": -1}, "top_k must be >= 0 (0 = off), got -1"),
        (SamplingSection, {"batch_size": 0}, "batch_size must be >= 1, got 0"),
        (SandboxSection, {"max_concurrency": 0}, "max_concurrency must be >= 1, got 0"),
        (SandboxSection, {"trials": 101}, "trials must be in [1, 100], got 101"),
        (SandboxSection, {"timeout_s": 0}, "timeout_s must be in (0, 3600], got 0.0"),
        (SFTSection, {"eval_fraction": 1.0}, "eval_fraction must be in [0, 1), got 1.0"),
        (SFTSection, {"max_steps": -1}, "max_steps must be >= 0, got -1"),
        (OptimSection, {"learning_rate": 0}, "learning_rate must be > 0, got 0.0"),
        (OptimSection, {"min_lr_ratio": 1.5}, "min_lr_ratio must be in [0, 1], got 1.5"),
        (OptimSection, {"max_grad_norm": -1}, "max_grad_norm must be >= 0, got -1.0"),
        (OptimSection, {"b2": 1.0}, "b2 must be in [0, 1), got 1.0"),
        (OptimSection, {"eps": NAN}, "eps must be > 0, got nan"),
        (CheckpointSection, {"every": -1}, "every must be >= 0, got -1"),
        (EvalSection, {"ids": (0,)}, "ids must be null or a non-empty list of ids >= 1, got [0]"),
        (GRPOSection, {"levels": ()}, "levels must be a non-empty list of levels >= 1, got []"),
        (GRPOSection, {"group_size": 1}, "group_size must be >= 2 (a group needs a baseline), got 1"),
        (GRPOSection, {"uniform_beta": -0.1}, "uniform_beta must be in [0, 1], got -0.1"),
        (GRPOSection, {"speedup_cap": 0}, "speedup_cap must be > 0, got 0.0"),
        (GRPOSection, {"epsilon_low": 1}, "epsilon_low must be in [0, 1), got 1.0"),
        (GRPOSection, {"epsilon_high": -0.2}, "epsilon_high must be a finite number >= 0, got -0.2"),
        (GRPOSection, {"beta": float("inf")}, "beta must be a finite number >= 0, got inf"),
    ],
)
def test_out_of_range_values_are_reported_with_key_range_and_value(section, values, message):
    with pytest.raises(ConfigError) as error:
        section(**values)
    assert str(error.value) == f"invalid {section.__name__}: {message}"


def test_every_problem_of_a_section_is_reported_at_once():
    with pytest.raises(ConfigError) as error:
        OptimSection(weight_decay=-1, b1=-0.1, eps=0)
    assert str(error.value) == (
        "invalid OptimSection: weight_decay must be >= 0, got -1.0; b1 must be in [0, 1), got -0.1; "
        "eps must be > 0, got 0.0"
    )


def test_closed_bounds_are_allowed():
    assert SamplingSection(temperature=0, top_p=1, top_k=0).top_p == 1.0
    assert SandboxSection(trials=100, timeout_s=3600).trials == 100
    assert OptimSection(min_lr_ratio=1, b1=0, weight_decay=0).min_lr_ratio == 1.0
    assert GRPOSection(group_size=2, uniform_beta=1, epsilon_low=0, alpha=0).group_size == 2
