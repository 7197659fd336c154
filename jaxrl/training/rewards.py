"""Sandbox verdicts -> the paper's two rewards, plus a mask of the evaluations that can be trusted.

    R_correct = valid x correct
    R_speedup = valid x correct x min(speedup, speedup_cap)        (speedup_cap = 2.0 by default)

The verdict's `status` decides: a sample scores only when its status is `ok` (the sandbox's contract
says `ok` means valid and correct, and that is checked here). `timeout` is the candidate's fault and
scores 0, like every other failure. `infra_error` (and a missing result, `None`, e.g. the sandbox could
not be reached) says nothing about the candidate: such a sample is marked unusable in `usable` and must
be left out of the group statistics and the loss, never scored as zero.

Timing: with `timing_available=False` (the CPU interpreter, or `EvalOptions.time=False`) nothing is
timed and every speedup counts as 1.0, so R_speedup = R_correct; `RewardConfig.metadata()` says so for
the run's metadata. With `timing_available=True` a correct sample without a speedup is an error rather
than a silent guess.

NumPy only: rewards are computed on the host, once per rollout, before any JAX work.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from sandbox_service.results import EvalResult, Status

SandboxResult = Mapping[str, Any] | EvalResult | None


@dataclasses.dataclass(frozen=True)
class RewardConfig:
    """speedup_cap: R_speedup's ceiling (the paper's 2.0). timing_available: False where nothing is timed."""

    speedup_cap: float = 2.0
    timing_available: bool = True

    def __post_init__(self) -> None:
        if not (math.isfinite(self.speedup_cap) and self.speedup_cap > 0):
            raise ValueError(f"speedup_cap must be a positive finite number, got {self.speedup_cap!r}")
        if not isinstance(self.timing_available, bool):
            raise ValueError(f"timing_available must be a bool, got {self.timing_available!r}")

    def metadata(self) -> dict[str, Any]:
        """What a run records about its rewards (states when speedups were not measured)."""
        note = (
            "speedup measured by the sandbox, capped at speedup_cap"
            if self.timing_available
            else "timing unavailable (e.g. CPU interpreter): every speedup counts as 1.0, so R_speedup = R_correct"
        )
        return {"speedup_cap": self.speedup_cap, "timing_available": self.timing_available, "speedup_note": note}


@dataclasses.dataclass(frozen=True)
class RewardBatch:
    """Per-sample rewards, all float32/bool arrays of one shape ([N] or [num_groups, group_size]).

    Unusable samples (`usable == False`) hold 0.0 in both rewards; that value means nothing and every
    consumer must apply the mask.
    """

    correct: np.ndarray
    speedup: np.ndarray
    usable: np.ndarray

    def __post_init__(self) -> None:
        if not (self.correct.shape == self.speedup.shape == self.usable.shape):
            raise ValueError(
                f"shapes differ: correct {self.correct.shape}, speedup {self.speedup.shape}, usable {self.usable.shape}"
            )


def _as_dict(result: SandboxResult, index: int) -> Mapping[str, Any] | None:
    if result is None:
        return None
    if isinstance(result, EvalResult):
        return result.to_dict()
    if isinstance(result, Mapping):
        return result
    raise TypeError(f"result {index}: expected a dict, an EvalResult or None, got {type(result).__name__}")


def score_result(result: SandboxResult, config: RewardConfig, index: int = 0) -> tuple[float, float, bool]:
    """(R_correct, R_speedup, usable) of one verdict; `index` only labels error messages."""
    data = _as_dict(result, index)
    if data is None:
        return 0.0, 0.0, False
    if "status" not in data:
        raise ValueError(f"result {index}: no 'status' field")
    try:
        status = Status(data["status"])
    except ValueError:
        raise ValueError(f"result {index}: unknown status {data['status']!r}") from None
    if status is Status.INFRA_ERROR:
        return 0.0, 0.0, False
    valid, correct = data.get("valid"), data.get("correct")
    if not (isinstance(valid, bool) and isinstance(correct, bool)):
        raise ValueError(f"result {index}: 'valid' and 'correct' must be booleans, got {valid!r} and {correct!r}")
    if status is not Status.OK:
        return 0.0, 0.0, True
    if not (valid and correct):
        raise ValueError(f"result {index}: status 'ok' but valid={valid} correct={correct} (sandbox contract broken)")
    if not config.timing_available:
        return 1.0, min(1.0, config.speedup_cap), True
    speedup = data.get("speedup")
    if speedup is None:
        raise ValueError(
            f"result {index}: correct but not timed (speedup is null); pass RewardConfig(timing_available=False) "
            "when the sandbox cannot time kernels (e.g. the CPU interpreter)"
        )
    speedup = float(speedup)
    if not (math.isfinite(speedup) and speedup > 0):
        raise ValueError(f"result {index}: speedup must be a positive finite number, got {speedup!r}")
    return 1.0, min(speedup, config.speedup_cap), True


def score_results(
    results: Sequence[SandboxResult], config: RewardConfig, group_size: int | None = None
) -> RewardBatch:
    """Score a rollout's verdicts in sampling order; with `group_size`, shape them [num_groups, group_size]."""
    scored = [score_result(r, config, i) for i, r in enumerate(results)]
    correct = np.array([s[0] for s in scored], dtype=np.float32)
    speedup = np.array([s[1] for s in scored], dtype=np.float32)
    usable = np.array([s[2] for s in scored], dtype=bool)
    if group_size is not None:
        if group_size < 1 or len(scored) % group_size:
            raise ValueError(f"{len(scored)} results do not split into groups of {group_size}")
        shape = (len(scored) // group_size, group_size)
        correct, speedup, usable = correct.reshape(shape), speedup.reshape(shape), usable.reshape(shape)
    return RewardBatch(correct=correct, speedup=speedup, usable=usable)
