"""A one-id-per-character tokenizer for the GRPO tests (no files, no hub)."""

from __future__ import annotations

EOS = 2


class ToyTokenizer:
    """One id per character: id = 3 + ord(c) for ASCII 0..124; EOS = 2 (decoded as nothing)."""

    eos_token_id = EOS
    bos_token_id = None

    def __len__(self) -> int:
        return 128

    def __call__(self, text: str, add_special_tokens: bool = False) -> dict[str, list[int]]:
        return {"input_ids": [3 + (ord(c) % 125) for c in text]}

    def decode(self, ids, skip_special_tokens: bool = True) -> str:
        return "".join(chr(i - 3) for i in ids if i >= 3)
