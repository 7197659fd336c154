"""Layer 4: shape, dtype, finiteness, per-dtype tolerances, and no constant guesses on degenerate problems."""

from __future__ import annotations

import torch

from sandbox_service.correctness import compare_trial, constant_would_pass, degenerate_outputs
from sandbox_service.options import DEFAULT_TOLERANCE


def tol(dtype: str) -> tuple[float, float]:
    return {"float16": (1e-3, 1e-3)}.get(dtype, DEFAULT_TOLERANCE)


def compare(expected, actual, degenerate=None):
    return compare_trial(expected, actual, tol, degenerate or [False] * len(expected), 0.02)


def test_match_within_tolerance_and_max_error():
    e = torch.randn(64, 64)
    result = compare([e], [e + 5e-3])
    assert result.passed and abs(result.max_abs_error - 5e-3) < 1e-6


def test_mismatches():
    e = torch.randn(8, 8)
    assert not compare([e], [e + 1]).passed
    assert "shape" in compare([e], [e.reshape(64)]).message
    assert "dtype" in compare([e], [e.double()]).message
    assert "returned 2" in compare([e], [e, e]).message


def test_nan_and_inf_never_pass_even_where_tolerance_is_loose():
    e = torch.zeros(4)
    for bad in (float("nan"), float("inf")):
        a = e.clone()
        a[0] = bad
        assert not compare([e], [a]).passed


def test_per_dtype_tolerance():
    e = torch.ones(16, dtype=torch.float16)
    assert not compare([e], [e + 5e-3]).passed  # float16 uses 1e-3 here
    assert compare([e.float()], [e.float() + 5e-3]).passed


def test_degenerate_problem_rejects_constants_but_accepts_the_real_answer():
    torch.manual_seed(0)
    # The mean of 2^18 standard normals has std 0.002, so zeros pass atol=1e-2.
    e = torch.randn(16, 2**18).mean(dim=1)
    assert constant_would_pass(e, 1e-2, 1e-2)
    flags = degenerate_outputs([[e]], tol)
    assert flags == [True]
    assert not compare_trial([e], [torch.zeros_like(e)], tol, flags, 0.02).passed
    assert not compare_trial([e], [torch.full_like(e, float(e.mean()))], tol, flags, 0.02).passed
    assert compare_trial([e], [e * (1 + 1e-6)], tol, flags, 0.02).passed


def test_ordinary_outputs_are_not_degenerate():
    assert degenerate_outputs([[torch.randn(128, 128)]], tol) == [False]


def test_a_scalar_that_changes_with_the_inputs_is_not_degenerate():
    # Within one trial a scalar always equals some constant; across trials no single constant passes.
    trials = [[torch.tensor(1.0)], [torch.tensor(1.5)], [torch.tensor(0.7)]]
    assert degenerate_outputs(trials, tol) == [False]
    assert degenerate_outputs([[torch.tensor(1.0)], [torch.tensor(1.005)]], tol) == [True]
