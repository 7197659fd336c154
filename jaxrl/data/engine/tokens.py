"""Token counts of SFT pairs, counted as SFT will see them.

The prompt is rendered through the tokenizer's chat template with the generation prompt, the completion
gets the EOS token SFT appends (`jaxrl.training.packing.tokenize_example`), so a pair whose total is at
most `sft.max_seq_len` is one SFT keeps.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol

from jaxrl.data.prompts import Message, render_prompt


class TokenCounter(Protocol):
    """`name` identifies the tokenizer (it goes into the build's fingerprint)."""

    name: str

    def count(self, messages: list[Message], completion: str) -> tuple[int, int]:
        """(prompt tokens, completion tokens)."""
        ...


class ChatTokenCounter:
    def __init__(self, tokenizer: Any, name: str):
        self.tokenizer = tokenizer
        self.name = name

    def count(self, messages: list[Message], completion: str) -> tuple[int, int]:
        prompt = render_prompt(self.tokenizer, messages, add_generation_prompt=True)
        encode = self.tokenizer.encode
        return len(encode(prompt, add_special_tokens=False)), len(encode(completion, add_special_tokens=False)) + 1


def load_token_counter(name: str) -> ChatTokenCounter:
    """The tokenizer of a bundled model (`smollm2-135m`), a tokenizer folder or a .gguf file."""
    from jaxrl.checkpoint.tokenizer import load_tokenizer
    from jaxrl.policy import BUNDLED, resolve_source

    source = resolve_source(name)[1] if name in BUNDLED else Path(name).expanduser()
    return ChatTokenCounter(load_tokenizer(source), name)
