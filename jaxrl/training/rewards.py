"""A rollout's sandbox verdicts -> reward arrays (per-verdict scoring lives in sandbox_service.reward).

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

Trustworthy speedups (`SpeedupGuard`): a measured speedup feeds R_speedup only when the reference took
at least `min_ref_time_us` (below that a kernel's time is launch overhead and the ratio is noise: the
learning run saw byte-identical completions of one group differ by a median 1.9x on tasks of a few
hundred elements) and when it is outside the noise floor, |speedup - 1| > `noise_floor` (group-std
normalisation would otherwise turn a 3% jitter into a full-size advantage). An untrusted speedup counts
as 1.0, so R_speedup = R_correct for that sample: identical kernels get identical rewards. The guard
rewrites the verdicts before scoring and marks each rewritten one `speedup_trusted: false`.

NumPy only: rewards are computed on the host, once per rollout, before any JAX work.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from sandbox_service.reward import RewardConfig, SandboxResult, score_result

__all__ = ["RewardBatch", "RewardConfig", "SpeedupGuard", "guard_speedups", "score_result", "score_results"]


@dataclasses.dataclass(frozen=True)
class SpeedupGuard:
    """When a measured speedup is trusted (see the module docstring); the defaults trust every speedup."""

    min_ref_time_us: float = 0.0
    noise_floor: float = 0.0

    def __post_init__(self) -> None:
        if not (math.isfinite(self.min_ref_time_us) and self.min_ref_time_us >= 0):
            raise ValueError(f"min_ref_time_us must be a finite number >= 0, got {self.min_ref_time_us!r}")
        if not (math.isfinite(self.noise_floor) and 0 <= self.noise_floor < 1):
            raise ValueError(f"noise_floor must lie in [0, 1), got {self.noise_floor!r}")

    def trusted(self, verdict: dict[str, Any]) -> bool:
        """Whether the verdict's speedup is a measurement to reward (False when it has none)."""
        speedup, ref_us = verdict.get("speedup"), verdict.get("ref_time_us")
        if speedup is None:
            return False
        if self.min_ref_time_us > 0 and (ref_us is None or ref_us < self.min_ref_time_us):
            return False
        return abs(float(speedup) - 1.0) > self.noise_floor


def guard_speedups(verdicts: Sequence[dict[str, Any] | None], guard: SpeedupGuard) -> list[dict[str, Any] | None]:
    """Copies of the verdicts whose untrusted speedups count as 1.0 (`speedup_trusted: false`); verdicts
    without a speedup, and None, are returned as they are."""
    out: list[dict[str, Any] | None] = []
    for verdict in verdicts:
        if verdict is None or verdict.get("speedup") is None or guard.trusted(verdict):
            out.append(verdict)
        else:
            out.append({**verdict, "speedup": 1.0, "speedup_trusted": False, "speedup_measured": verdict["speedup"]})
    return out


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
