"""Sandbox verdicts as rewards: the paper's R_correct and R_speedup, and an adapter for other frameworks.

    R_correct = valid x correct
    R_speedup = valid x correct x min(speedup, speedup_cap)        (speedup_cap = 2.0 by default)

The verdict's `status` decides: a sample scores only when its status is `ok` (checked against `valid`
and `correct`). `timeout` and every other candidate failure score 0. `infra_error`, `reference_error` (the
task's reference is broken) or no result at all say nothing about the candidate: it is reported as unusable, to be masked out of group
statistics rather than scored 0. With `timing_available=False` (the CPU interpreter) every speedup
counts as 1.0. No torch, no NumPy: the trainer and any other framework import this.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from sandbox_service.options import CandidateFormat, EvalOptions
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
    if not status.judges_the_candidate:  # infra_error, reference_error
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


def _completion_text(completion: Any) -> str:
    """TRL passes completions as strings, or (conversational datasets) as lists of chat messages."""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, Sequence) and completion and isinstance(completion[-1], Mapping):
        return str(completion[-1].get("content", ""))
    raise TypeError(f"a completion must be a string or a list of chat messages, got {type(completion).__name__}")


def make_reward_function(
    client,
    *,
    reward: str = "correct",
    config: RewardConfig = RewardConfig(),
    reference_key: str = "reference",
    options: EvalOptions | None = None,
) -> Callable[..., list[float | None]]:
    """A reward function in TRL's form, `f(prompts, completions, **dataset_columns) -> list[float | None]`.

    `client` is a `SandboxClient`; each completion is evaluated against the reference source found in
    the dataset column `reference_key`. `reward` picks "correct" (R_correct) or "speedup" (R_speedup).
    Samples the sandbox could not judge (infra_error) return None, which TRL leaves out of the reward
    instead of counting as 0.
    """
    if reward not in ("correct", "speedup"):
        raise ValueError(f"reward must be 'correct' or 'speedup', got {reward!r}")
    options = options or EvalOptions(candidate_format=CandidateFormat.COMPLETION, time=config.timing_available)

    def reward_function(prompts=None, completions=None, **columns) -> list[float | None]:
        if completions is None or reference_key not in columns:
            raise ValueError(f"needs `completions` and the dataset column {reference_key!r}")
        references = columns[reference_key]
        pairs = [(ref, _completion_text(c)) for ref, c in zip(references, completions, strict=True)]
        from sandbox_service.client import Pair

        results = dict(client.evaluate_many([Pair(ref, text, options) for ref, text in pairs]))
        scores: list[float | None] = []
        for index in range(len(pairs)):
            r_correct, r_speedup, usable = score_result(results[index], config, index)
            scores.append((r_correct if reward == "correct" else r_speedup) if usable else None)
        return scores

    reward_function.__name__ = f"sandbox_{reward}_reward"
    return reward_function
