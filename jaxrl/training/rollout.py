"""The records a GRPO step passes around: a task and the rollout of G completions per task.

They live apart from `grpo` (which builds them) so that consumers such as `rollout_log` depend on the
records only, not on the loop: the import graph goes rollout <- rollout_log <- grpo.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from jaxrl.sampling.api import Completion
from sandbox_service.options import InputSet


@dataclasses.dataclass(frozen=True)
class Task:
    """One RL task: `prompt` is rendered text (chat template applied); `reference` is what the scorer
    compares against (the PyTorch reference source); a candidate must also be correct on `input_sets`."""

    key: str
    prompt: str
    reference: str
    input_sets: tuple[InputSet, ...] = ()


@dataclasses.dataclass
class Rollout:
    """G completions for each of a step's tasks, in task-major order, with their verdicts and segments."""

    tasks: list[Task]
    prompt_ids: list[list[int]]
    completions: list[list[Completion]]
    verdicts: list[list[dict[str, Any] | None]]
    segments: list[list[np.ndarray]]
    generation_s: float
    scoring_wait_s: float

    @property
    def group_size(self) -> int:
        return len(self.completions[0])

    def flat(self) -> list[tuple[int, int]]:
        return [(t, g) for t in range(len(self.tasks)) for g in range(self.group_size)]
