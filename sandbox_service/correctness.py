"""Layer 4, correctness: compare a candidate's outputs with the reference's, trial by trial.

Runs in the reference child, a process the candidate's code never ran in. Shape and dtype must match,
non-finite values never pass, and `allclose` uses per-dtype tolerances. For degenerate problems
(where a constant output would pass the tolerance) a relative L2 bound is added, so that a constant
guess cannot be correct.
"""

from __future__ import annotations

import dataclasses
import functools
import math
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


# Comparisons run over flat chunks of this many elements, so that their temporaries stay small (128 MB in
# float64) even for outputs of many GB: a full-size KernelBench output is 6.4 GB.
CHUNK = 1 << 24


def _flat(t: torch.Tensor) -> torch.Tensor:
    """All of a tensor's numbers, flat: a complex tensor's real and imaginary parts side by side (a conversion
    to a real dtype would drop the imaginary parts, and torch only warns: red team 6)."""
    if t.is_complex():
        t = torch.view_as_real(t.resolve_conj())
    return t.reshape(-1)


def _pairs(actual: torch.Tensor, expected: torch.Tensor):
    a, e = _flat(actual), _flat(expected)
    for start in range(0, e.numel(), CHUNK):
        yield a[start : start + CHUNK], e[start : start + CHUNK]


def _chunks(t: torch.Tensor):
    flat = _flat(t)
    for start in range(0, flat.numel(), CHUNK):
        yield flat[start : start + CHUNK]


def _precision(expected: torch.Tensor) -> torch.dtype:
    return torch.float64 if expected.dtype in (torch.float64, torch.complex128) else torch.float32


def all_finite(t: torch.Tensor) -> bool:
    """No NaN or Inf (always True for integer and boolean tensors)."""
    if not (t.is_floating_point() or t.is_complex()):
        return True
    return all(bool(torch.isfinite(c).all()) for c in _chunks(t))


def within(actual: torch.Tensor, expected: torch.Tensor, atol: float, rtol: float) -> bool:
    if not actual.is_floating_point() and not actual.is_complex():
        return bool(torch.equal(actual, expected))
    precision = _precision(expected)
    for a, e in _pairs(actual, expected):
        a, e = a.to(precision), e.to(precision)
        if not bool(((a - e).abs() <= atol + rtol * e.abs()).all()):
            return False
    return True


# The constants that would pass against an output: an interval [lo, hi] (empty when lo > hi), or, for a complex
# output, one interval for the real parts and one for the imaginary parts (a complex constant passes when both
# of its parts do, since the comparison is part by part).
Band = tuple
EMPTY_BAND: Band = (math.inf, -math.inf)


def _real_band(values: torch.Tensor, precision: torch.dtype, atol: float, rtol: float) -> Band:
    lo, hi = -math.inf, math.inf
    for e in _chunks(values):
        e = e.to(precision)
        slack = atol + rtol * e.abs()
        lo, hi = max(lo, float((e - slack).max())), min(hi, float((e + slack).min()))
    return lo, hi


def constant_band(expected: torch.Tensor, atol: float, rtol: float) -> Band:
    """The constants c that pass `allclose` against every element of `expected` (|c - e| <= atol + rtol |e|):
    empty when there is none, and for integer outputs, which are compared exactly."""
    if expected.numel() == 0 or not (expected.is_floating_point() or expected.is_complex()):
        return EMPTY_BAND
    if expected.is_complex():
        parts = torch.view_as_real(expected.resolve_conj()).reshape(-1, 2)
        return tuple(_real_band(parts[:, i], _precision(expected), atol, rtol) for i in range(2))
    return _real_band(expected, _precision(expected), atol, rtol)


def _nested(band: Band) -> bool:
    return isinstance(band[0], tuple)


def intersect(a: Band, b: Band) -> Band:
    if _nested(a) or _nested(b):
        if not (_nested(a) and _nested(b)):
            return EMPTY_BAND  # a complex output in one trial and a real one in another: no one constant
        return tuple(intersect(x, y) for x, y in zip(a, b))
    return max(a[0], b[0]), min(a[1], b[1])


def band_is_empty(band: Band) -> bool:
    return any(band_is_empty(part) for part in band) if _nested(band) else band[0] > band[1]


def constant_would_pass(expected: torch.Tensor, atol: float, rtol: float) -> bool:
    """Would some single constant (zeros included) pass `allclose` against this output?"""
    return not band_is_empty(constant_band(expected, atol, rtol))


def _max_abs_error(actual: torch.Tensor, expected: torch.Tensor) -> float:
    return max((float((a.to(torch.float64) - e.to(torch.float64)).abs().max()) for a, e in _pairs(actual, expected)),
               default=0.0)


def _l2(actual: torch.Tensor | None, expected: torch.Tensor) -> float:
    """||actual - expected||_2 (or ||expected||_2 when actual is None), in float64, chunk by chunk."""
    total = 0.0
    if actual is None:
        for e in _chunks(expected):
            total += float(e.to(torch.float64).square().sum())
    else:
        for a, e in _pairs(actual, expected):
            total += float((a.to(torch.float64) - e.to(torch.float64)).square().sum())
    return total**0.5


def degenerate_bands(outputs: list[torch.Tensor], tolerances: Tolerances) -> list[Band]:
    """Per output of one trial: the band of constants that would pass against it."""
    return [constant_band(o, *tolerances(dtype_name(o.dtype))) for o in outputs]


def degenerate_outputs(expected_trials: list[list[torch.Tensor]], tolerances: Tolerances) -> list[bool]:
    """Per output position: True when one constant would pass in every trial (the bands intersect).

    Across trials, not per trial: a scalar loss always equals some constant within one trial, but when
    it changes with the inputs no single constant passes every trial."""
    return degenerate_from_bands([degenerate_bands(trial, tolerances) for trial in expected_trials])


def degenerate_from_bands(per_trial: list[list[Band]]) -> list[bool]:
    positions = zip(*per_trial)
    return [not band_is_empty(functools.reduce(intersect, bands)) for bands in positions]


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
        if not all_finite(a):
            return TrialComparison(False, None, f"{where}: contains NaN or Inf")
        if a.is_floating_point():
            max_abs = max(max_abs, _max_abs_error(a, e))
        atol, rtol = tolerances(dtype_name(e.dtype))
        if not within(a, e, atol, rtol):
            return TrialComparison(False, max_abs, f"{where}: not within atol={atol} rtol={rtol}")
        if degenerate[index]:
            norm = _l2(None, e)
            bound = degenerate_rel_l2 * norm
            error = _l2(a, e)
            if error > bound:
                return TrialComparison(
                    False,
                    max_abs,
                    f"{where}: degenerate problem (a constant would pass the tolerance); "
                    f"relative L2 error {error / max(norm, 1e-300):.3g} > {degenerate_rel_l2}",
                )
    return TrialComparison(True, max_abs)
