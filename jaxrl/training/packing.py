"""SFT examples -> token ids -> packed rows with per-segment attention and a completion-only loss mask.

An example becomes `prompt ids + completion ids + [eos]`: the prompt is rendered by the tokenizer's
chat template with the generation prompt (exactly what the sampler is given at evaluation), and the
completion and the end-of-turn token are appended, so the model learns to stop. Several examples are
packed into one row of `seq_len` tokens; each keeps its own segment id (1, 2, ...; 0 = padding) and
positions starting at 0, so the model (`segment_ids=`) attends only within an example and each one
is computed exactly as if it were alone.

Rows hold, per position t: `tokens`, `positions`, `segment_ids`, `targets` (the next token of the
same example) and `loss_mask` (1 where that next token is a completion token). The loss is thus on
completion tokens only, each predicted from the one before, the first from the prompt's last token.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any, Literal, Protocol

import numpy as np

from jaxrl.data.prompts import render_prompt
from jaxrl.data.sft_data import SFTExample

ROW_FIELDS = ("tokens", "positions", "segment_ids", "targets", "loss_mask")
Overlong = Literal["drop", "truncate"]


class Tokenizer(Protocol):
    """What packing needs of a (transformers) tokenizer."""

    eos_token_id: int | None

    def encode(self, text: str, add_special_tokens: bool = ...) -> list[int]: ...

    def apply_chat_template(self, messages: Any, **kwargs: Any) -> Any: ...


@dataclasses.dataclass(frozen=True)
class TokenizedExample:
    """Token ids of one example; the loss covers ids[prompt_len:] (the completion and its EOS)."""

    ids: np.ndarray
    prompt_len: int

    def __post_init__(self) -> None:
        ids = np.asarray(self.ids, np.int32)
        if ids.ndim != 1:
            raise ValueError(f"ids must be 1-D, got shape {ids.shape}")
        if not 1 <= self.prompt_len < len(ids):
            raise ValueError(f"prompt_len must be in [1, {len(ids)}) for {len(ids)} ids, got {self.prompt_len}")
        object.__setattr__(self, "ids", ids)

    def __len__(self) -> int:
        return len(self.ids)


def prompt_text(example: SFTExample, tokenizer: Tokenizer) -> str:
    """The rendered prompt: messages through the chat template, or the example's own prompt text."""
    if example.prompt_text is not None:
        return example.prompt_text
    return render_prompt(tokenizer, list(example.messages), add_generation_prompt=True)


def tokenize_example(
    example: SFTExample, tokenizer: Tokenizer, max_len: int, overlong: Overlong = "drop"
) -> TokenizedExample | None:
    """The example's ids, or None when it is longer than `max_len` and cannot be kept.

    overlong "drop" drops any example longer than max_len; "truncate" cuts the completion's end
    (its EOS included) and drops only examples whose prompt leaves no completion token.
    """
    if overlong not in ("drop", "truncate"):
        raise ValueError(f"overlong must be 'drop' or 'truncate', got {overlong!r}")
    eos = tokenizer.eos_token_id
    if eos is None:
        raise ValueError("the tokenizer has no eos_token_id; SFT needs one to end each completion")
    prompt = tokenizer.encode(prompt_text(example, tokenizer), add_special_tokens=False)
    completion = tokenizer.encode(example.completion, add_special_tokens=False) + [eos]
    if not prompt:
        raise ValueError(f"the prompt tokenizes to nothing ({example.source or 'example'})")
    if len(prompt) + len(completion) > max_len:
        if overlong == "drop" or len(prompt) >= max_len:
            return None
        completion = completion[: max_len - len(prompt)]
    return TokenizedExample(np.asarray(prompt + completion, np.int32), len(prompt))


def first_fit_decreasing(lengths: Sequence[int], capacity: int) -> list[list[int]]:
    """Bins of item indices, each summing to <= capacity: longest items first, each into the first
    bin with room. Deterministic (ties keep index order); within a bin, indices are ascending."""
    if any(n > capacity or n < 1 for n in lengths):
        raise ValueError(f"every length must be in [1, {capacity}], got {sorted(set(lengths))[-3:]}")
    order = sorted(range(len(lengths)), key=lambda i: (-lengths[i], i))
    bins: list[list[int]] = []
    room: list[int] = []
    for i in order:
        for b, free in enumerate(room):
            if lengths[i] <= free:
                bins[b].append(i)
                room[b] -= lengths[i]
                break
        else:
            bins.append([i])
            room.append(capacity - lengths[i])
    return [sorted(b) for b in bins]


def pack(examples: Sequence[TokenizedExample], seq_len: int, row_multiple: int = 1) -> dict[str, np.ndarray]:
    """Rows [R, seq_len] (see the module docstring) holding every example once; R is the fewest rows
    first-fit-decreasing needs, rounded up to a multiple of `row_multiple` with empty rows (at least
    one row multiple, even for no examples)."""
    if seq_len < 2 or row_multiple < 1:
        raise ValueError(f"seq_len must be >= 2 and row_multiple >= 1, got {seq_len}, {row_multiple}")
    bins = first_fit_decreasing([len(e) for e in examples], seq_len)
    num_rows = max(-(-len(bins) // row_multiple), 1) * row_multiple
    rows = {name: np.zeros((num_rows, seq_len), np.int32) for name in ROW_FIELDS}
    for r, members in enumerate(bins):
        start = 0
        for segment, index in enumerate(members, start=1):
            example = examples[index]
            n = len(example)
            span = slice(start, start + n)
            rows["tokens"][r, span] = example.ids
            rows["positions"][r, span] = np.arange(n)
            rows["segment_ids"][r, span] = segment
            # Position t predicts ids[t + 1]; it counts when that id belongs to the completion.
            rows["targets"][r, start : start + n - 1] = example.ids[1:]
            rows["loss_mask"][r, start + example.prompt_len - 1 : start + n - 1] = 1
            start += n
    return rows


def split_rows(rows: dict[str, np.ndarray], rows_per_batch: int) -> list[dict[str, np.ndarray]]:
    """Consecutive micro-batches of `rows_per_batch` rows (the row count must be a multiple)."""
    total = len(rows["tokens"])
    if rows_per_batch < 1 or total % rows_per_batch:
        raise ValueError(f"{total} rows do not split into micro-batches of {rows_per_batch}")
    return [{k: v[i : i + rows_per_batch] for k, v in rows.items()} for i in range(0, total, rows_per_batch)]
