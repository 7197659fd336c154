"""Per-sample GRPO records in <run dir>/rollouts.jsonl: why each sample scored what it did.

metrics.jsonl holds a step's aggregates; this file holds one JSON line per sample, so a masked or
failed sample can be traced to its verdict (which `infra_error`, with what message). Fields:

    step, task, sample              the step (numbered as in metrics.jsonl), the task key, the index in its group
    status, valid, correct, speedup the sandbox verdict (these and the next four are null without a verdict)
    error, violations, stdout_tail  the verdict's texts ("layer/rule: message" per violation), each cut to
                                    about TEXT_LIMIT characters
    duration_s                      how long the sandbox took over it
    r_correct, r_speedup, usable    the rewards; usable false = masked as an infrastructure failure
    plan_advantage, code_advantage  the sequence-level advantages of `hrd.sequence_advantages` (the plan
                                    one already carries alpha; both 0 for unusable samples)
    completion_tokens, plan_tokens, code_tokens, finish_reason
    completion                      the completion text, only with `log_completions` (large)

Non-finite numbers are written as null (JSON has no NaN). A resumed run drops the lines of steps after
its checkpoint, as metrics.jsonl does; only process 0 writes.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np

from jaxrl.training.hrd import CODE, PLAN
from jaxrl.training.metrics_log import drop_lines_after, read_jsonl
from jaxrl.training.rewards import RewardBatch
from jaxrl.training.rollout import Rollout
from sandbox_service.results import truncate

ROLLOUTS_FILE = "rollouts.jsonl"
TEXT_LIMIT = 500


class RolloutLogger:
    """Appends each step's sample records to rollouts.jsonl; `enabled=False` (processes other than 0)
    writes nothing."""

    def __init__(self, run_dir: str | Path, *, start_step: int = 0, log_completions: bool = False,
                 enabled: bool = True):
        self.path = Path(run_dir) / ROLLOUTS_FILE
        self.log_completions = log_completions
        self._file = None
        if not enabled:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        drop_lines_after(self.path, start_step)
        self._file = open(self.path, "a", encoding="utf-8")

    def log(self, step: int, rollout: Rollout, rewards: RewardBatch, plan_advantage: Any,
            code_advantage: Any) -> None:
        if self._file is None:
            return
        records = rollout_records(step, rollout, rewards, plan_advantage, code_advantage,
                                  log_completions=self.log_completions)
        self._file.write("".join(json.dumps(r) + "\n" for r in records))
        self._file.flush()

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None

    def __enter__(self) -> RolloutLogger:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def rollout_records(step: int, rollout: Rollout, rewards: RewardBatch, plan_advantage: Any, code_advantage: Any,
                    *, log_completions: bool = False) -> list[dict[str, Any]]:
    """One record per sample, task-major (the order of `Rollout.flat`); advantages as `sequence_advantages`
    returns them ([num_groups, G] or flat)."""
    flat = rollout.flat()
    columns = {
        "r_correct": rewards.correct, "r_speedup": rewards.speedup, "usable": rewards.usable,
        "plan_advantage": plan_advantage, "code_advantage": code_advantage,
    }
    columns = {name: np.asarray(value).reshape(-1) for name, value in columns.items()}
    for name, value in columns.items():
        if len(value) != len(flat):
            raise ValueError(f"{name} holds {len(value)} values for a rollout of {len(flat)} samples")
    records = []
    for r, (t, g) in enumerate(flat):
        completion = rollout.completions[t][g]
        segments = rollout.segments[t][g]
        record = {"step": int(step), "task": rollout.tasks[t].key, "sample": g}
        record.update(verdict_fields(rollout.verdicts[t][g]))
        record.update({
            "r_correct": _number(columns["r_correct"][r]),
            "r_speedup": _number(columns["r_speedup"][r]),
            "usable": bool(columns["usable"][r]),
            "plan_advantage": _number(columns["plan_advantage"][r]),
            "code_advantage": _number(columns["code_advantage"][r]),
            "completion_tokens": len(completion.token_ids),
            "plan_tokens": int((segments == PLAN).sum()),
            "code_tokens": int((segments == CODE).sum()),
            "finish_reason": completion.finish_reason,
        })
        if log_completions:
            record["completion"] = completion.text
        records.append(record)
    return records


def verdict_fields(verdict: dict[str, Any] | None) -> dict[str, Any]:
    """The record's verdict fields from a verdict dict (`grpo.verdict_dict`); None = no verdict."""
    v = verdict or {}
    violations = [f"{x['layer']}/{x['rule']}: {x['message']}" for x in v.get("violations") or []]
    fields = {
        "status": v.get("status"),
        "valid": v.get("valid"),
        "correct": v.get("correct"),
        "speedup": _number(v.get("speedup")),
        "error": _text(v.get("error")),
        "violations": [_text(x) for x in violations],
        "stdout_tail": _text(v.get("stdout_tail")),
        "duration_s": _number(v.get("duration_s")),
    }
    return fields if verdict is not None else dict.fromkeys(fields)


def read_rollouts(run_dir: str | Path) -> list[dict[str, Any]]:
    """The records of a run's rollouts.jsonl, in order."""
    return read_jsonl(Path(run_dir) / ROLLOUTS_FILE)


def _number(value: Any) -> float | None:
    if value is None:
        return None
    number = float(value)
    return number if math.isfinite(number) else None


def _text(value: str | None) -> str | None:
    return None if value is None else truncate(value, TEXT_LIMIT)
