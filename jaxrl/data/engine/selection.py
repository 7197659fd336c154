"""Which rows the build's outputs take from its shards' task outcomes, and how far the targets are.

The main stream's outcomes give the SFT pairs (train split, within the token budget) and the first
`rl_tasks` validated tasks of every split, in task order. With an rl-split target (`rl_split_tasks`), the
rl-split tasks among the main stream's validated ones, then those of the rl stream (shards drawn from the
rl split's recipes only), count toward it, and rl_tasks.jsonl adds the first `rl_split_tasks` of them that
its first `rl_tasks` rows do not already hold. Each stream screens out repeats within itself (so a shard
is a function of its index alone); an rl-stream task repeating a main-stream task is dropped here.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from jaxrl.config.schema import DataSection
from jaxrl.data.engine.outcomes import DUPLICATE, VALIDATE, Drop, TaskOutcome
from jaxrl.data.engine.rows import pair_tokens

MAIN = ""   # the main stream: every split
RL = "rl"   # the rl stream: the rl split's recipes only
RL_SPLIT = "rl"


class Selection:
    """The outcomes of the shards so far, per stream in task order, and the rows they give."""

    def __init__(self, data: DataSection):
        self.data = data
        self.outcomes: list[TaskOutcome] = []       # the main stream's
        self.rl_outcomes: list[TaskOutcome] = []    # the rl stream's, repeats of main-stream tasks dropped
        self.shards = 0
        self._seen: dict[str, tuple[set[str], set[str]]] = {MAIN: (set(), set()), RL: (set(), set())}
        self.sft_count = 0
        self.rl_count = 0
        self.rl_split_count = 0

    def seen(self, stream: str) -> tuple[set[str], set[str]]:
        """(task ids, reference digests) a new shard of `stream` must not repeat."""
        return self._seen[stream]

    def add(self, outcomes: list[TaskOutcome], stream: str = MAIN) -> None:
        """A shard's outcomes; the main stream's all come before the rl stream's."""
        if stream == RL:
            outcomes = [self._unless_repeat(o) for o in outcomes]
        ids, codes = self._seen[stream]
        for o in outcomes:
            if o.drop is None or o.drop.stage == VALIDATE:  # what later tasks must not repeat
                ids.add(o.task_id)
                codes.add(o.code_sha)
        if stream == RL:
            self.rl_outcomes += outcomes
        else:
            self.outcomes += outcomes
            self.sft_count += sum(1 for o in outcomes if o.sft_row is not None and self._fits(o.sft_row))
            self.rl_count += sum(1 for o in outcomes if o.rl_row is not None)
        self.shards += 1
        self.rl_split_count += sum(1 for o in outcomes if o.rl_row is not None and o.split == RL_SPLIT)

    def _unless_repeat(self, outcome: TaskOutcome) -> TaskOutcome:
        ids, codes = self._seen[MAIN]
        if outcome.drop is None and (outcome.task_id in ids or outcome.code_sha in codes):
            return dataclasses.replace(outcome, drop=Drop(DUPLICATE, "repeats a task of the main stream"),
                                       rl_row=None)
        return outcome

    def _fits(self, row: dict[str, Any]) -> bool:
        budget = self.data.max_completion_tokens
        return pair_tokens(row) <= self.data.max_tokens and (not budget or row["tokens"]["completion"] <= budget)

    def main_met(self) -> bool:
        return self.sft_count >= self.data.sft_pairs and self.rl_count >= self.data.rl_tasks

    def rl_split_met(self) -> bool:
        return self.rl_split_count >= self.data.rl_split_tasks

    def all_outcomes(self) -> list[TaskOutcome]:
        return self.outcomes + self.rl_outcomes

    def sft_rows(self) -> list[dict[str, Any]]:
        rows = [o.sft_row for o in self.outcomes if o.sft_row is not None and self._fits(o.sft_row)]
        return rows[: self.data.sft_pairs]

    def rl_rows(self) -> list[dict[str, Any]]:
        rows = [o.rl_row for o in self.outcomes if o.rl_row is not None]
        chosen = rows[: self.data.rl_tasks]
        if not self.data.rl_split_tasks:
            return chosen
        split = [row for row in rows + [o.rl_row for o in self.rl_outcomes if o.rl_row is not None]
                 if row["split"] == RL_SPLIT][: self.data.rl_split_tasks]
        held = {row["task_id"] for row in chosen}
        return chosen + [row for row in split if row["task_id"] not in held]
