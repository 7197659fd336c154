"""What any text generator offers the evaluation and GRPO loops: prompts in, completions with logprobs out.

The JAX KV-cache sampler implements it; tests use scripted generators that emit known completions.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Protocol


@dataclasses.dataclass(frozen=True)
class SamplingParams:
    """temperature 0 means greedy; top_k 0 and top_p 1.0 disable those filters."""

    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    max_new_tokens: int = 1024
    num_samples: int = 1
    stop_strings: tuple[str, ...] = ()
    stop_token_ids: tuple[int, ...] = ()  # in addition to the tokenizer's end-of-sequence tokens
    seed: int = 0

    def __post_init__(self):
        if self.temperature < 0 or not 0 < self.top_p <= 1 or self.top_k < 0:
            raise ValueError("temperature must be >= 0, top_p in (0, 1], top_k >= 0")
        if self.max_new_tokens < 1 or self.num_samples < 1:
            raise ValueError("max_new_tokens and num_samples must be >= 1")


@dataclasses.dataclass(frozen=True)
class Completion:
    """One sampled continuation: the new tokens only, each with its log-probability under the sampler."""

    text: str
    token_ids: tuple[int, ...]
    logprobs: tuple[float, ...]
    finish_reason: str  # "stop" (EOS, stop token or stop string) or "length"
    # Tokens generated, for generators that return text without token ids (a remote endpoint's usage
    # count); None: len(token_ids).
    token_count: int | None = None

    def __post_init__(self):
        if len(self.token_ids) != len(self.logprobs):
            raise ValueError("token_ids and logprobs must have the same length")
        if self.token_count is not None and (self.token_count < 0 or (self.token_ids and
                                                                       self.token_count != len(self.token_ids))):
            raise ValueError(f"token_count must be >= 0 and match token_ids when both are given, got {self.token_count}")
        if self.finish_reason not in ("stop", "length"):
            raise ValueError(f"finish_reason must be 'stop' or 'length', got {self.finish_reason!r}")

    @property
    def num_tokens(self) -> int:
        return len(self.token_ids) if self.token_count is None else self.token_count


class TextGenerator(Protocol):
    def generate(self, prompts: Sequence[str], params: SamplingParams) -> list[list[Completion]]:
        """For each prompt (already rendered text, e.g. through a chat template), `params.num_samples` completions."""
        ...
