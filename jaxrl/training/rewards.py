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

NumPy only: rewards are computed on the host, once per rollout, before any JAX work.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np

from sandbox_service.reward import RewardConfig, SandboxResult, score_result

__all__ = ["RewardBatch", "RewardConfig", "score_result", "score_results"]


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
