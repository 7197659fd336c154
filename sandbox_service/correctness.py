"""Layer 4, correctness: compare a candidate's outputs with the reference's, trial by trial.

Runs in the reference child, a process the candidate's code never ran in. Shape and dtype must match,
non-finite values never pass, and `allclose` uses per-dtype tolerances. For degenerate problems
(where a constant output would pass the tolerance) a relative L2 bound is added, so that a constant
guess cannot be correct.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import torch

Tolerances = Callable[[str], tuple[float, float]]


@dataclasses.dataclass(frozen=True)
class TrialComparison:
    passed: bool
    max_abs_error: float | None
    message: str = ""


def dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def within(actual: torch.Tensor, expected: torch.Tensor, atol: float, rtol: float) -> bool:
    if not actual.is_floating_point() and not actual.is_complex():
        return bool(torch.equal(actual, expected))
    precision = torch.float64 if expected.dtype == torch.float64 else torch.float32
    a, e = actual.to(precision), expected.to(precision)
    return bool(((a - e).abs() <= atol + rtol * e.abs()).all())


def constant_would_pass(expected: torch.Tensor, atol: float, rtol: float) -> bool:
    """Would zeros, or the single best constant, pass `allclose` against this output?"""
    if not expected.is_floating_point() or expected.numel() == 0:
        return False
    precision = torch.float64 if expected.dtype == torch.float64 else torch.float32
    e = expected.to(precision)
    zeros = torch.zeros_like(e)
    mid = (e.max() + e.min()) / 2  # the constant with the smallest worst-case error
    return within(zeros, e, atol, rtol) or within(torch.full_like(e, float(mid)), e, atol, rtol)


def degenerate_outputs(expected_trials: list[list[torch.Tensor]], tolerances: Tolerances) -> list[bool]:
    """Per output position: True when a constant would pass in every trial."""
    flags = []
    for position in range(len(expected_trials[0])):
        outs = [trial[position] for trial in expected_trials]
        flags.append(all(constant_would_pass(o, *tolerances(dtype_name(o.dtype))) for o in outs))
    return flags


def compare_trial(
    expected: list[torch.Tensor],
    actual: list[torch.Tensor],
    tolerances: Tolerances,
    degenerate: list[bool],
    degenerate_rel_l2: float,
) -> TrialComparison:
    if len(actual) != len(expected):
        return TrialComparison(False, None, f"returned {len(actual)} output tensors, expected {len(expected)}")
    max_abs = 0.0
    for index, (e, a) in enumerate(zip(expected, actual)):
        where = f"output {index}"
        if tuple(a.shape) != tuple(e.shape):
            return TrialComparison(False, None, f"{where}: shape {tuple(a.shape)}, expected {tuple(e.shape)}")
        if a.dtype != e.dtype:
            return TrialComparison(False, None, f"{where}: dtype {dtype_name(a.dtype)}, expected {dtype_name(e.dtype)}")
        a = a.to(e.device)
        if a.numel() == 0:
            continue
        if (a.is_floating_point() or a.is_complex()) and not bool(torch.isfinite(a).all()):
            return TrialComparison(False, None, f"{where}: contains NaN or Inf")
        if a.is_floating_point():
            diff = (a.to(torch.float64) - e.to(torch.float64)).abs()
            max_abs = max(max_abs, float(diff.max()))
        atol, rtol = tolerances(dtype_name(e.dtype))
        if not within(a, e, atol, rtol):
            return TrialComparison(False, max_abs, f"{where}: not within atol={atol} rtol={rtol}")
        if degenerate[index]:
            e64, a64 = e.to(torch.float64), a.to(torch.float64)
            bound = degenerate_rel_l2 * float(torch.linalg.vector_norm(e64))
            error = float(torch.linalg.vector_norm(a64 - e64))
            if error > bound:
                return TrialComparison(
                    False,
                    max_abs,
                    f"{where}: degenerate problem (a constant would pass the tolerance); "
                    f"relative L2 error {error / max(bound / degenerate_rel_l2, 1e-300):.3g} > {degenerate_rel_l2}",
                )
    return TrialComparison(True, max_abs)
