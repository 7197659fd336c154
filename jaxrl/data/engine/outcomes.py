"""What happened to each generated task: the records a shard file holds, one JSON line per task.

A task is either dropped (with the stage and the reason) or kept as an RL task; a kept train-split task
also records its teacher-pair attempts (template, then Inductor) and, when one verified, its SFT row.
Everything the outputs, the card and the summary's counts say is derived from these records, so a shard
read back from disk gives the same files as one just built.
"""

from __future__ import annotations

import dataclasses
from typing import Any

DECONTAMINATE, DUPLICATE, VALIDATE = "decontaminate", "duplicate", "validate"
TEMPLATE, INDUCTOR = "template", "inductor"


@dataclasses.dataclass(frozen=True)
class Drop:
    """Why a task left the build: `stage` is decontaminate, duplicate or validate."""

    stage: str
    reason: str


@dataclasses.dataclass(frozen=True)
class PairAttempt:
    """One teacher pair tried for a task: its origin (template | inductor), the verification status
    (an EvalResult status; for Inductor, `failed` or `unavailable` when it produced no module) and why."""

    origin: str
    status: str
    reason: str = ""

    @property
    def ok(self) -> bool:
        return self.status == "ok"


@dataclasses.dataclass(frozen=True)
class TaskOutcome:
    index: int
    task_id: str
    family: str
    split: str
    code_sha: str
    drop: Drop | None = None
    decontam: dict[str, Any] | None = None  # {"kernelbench": key, "matcher": "ast" | "signature"}
    rl_row: dict[str, Any] | None = None
    attempts: tuple[PairAttempt, ...] = ()
    sft_row: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "task_id": self.task_id,
            "family": self.family,
            "split": self.split,
            "code_sha": self.code_sha,
            "drop": None if self.drop is None else dataclasses.asdict(self.drop),
            "decontam": self.decontam,
            "rl_row": self.rl_row,
            "attempts": [dataclasses.asdict(a) for a in self.attempts],
            "sft_row": self.sft_row,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TaskOutcome:
        return cls(
            index=data["index"], task_id=data["task_id"], family=data["family"], split=data["split"],
            code_sha=data["code_sha"], drop=None if data["drop"] is None else Drop(**data["drop"]),
            decontam=data["decontam"], rl_row=data["rl_row"],
            attempts=tuple(PairAttempt(**a) for a in data["attempts"]), sft_row=data["sft_row"],
        )
