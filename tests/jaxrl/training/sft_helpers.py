"""Shared pieces of the SFT tests: a character-level tokenizer, tiny examples, a tiny trainer setup."""

from __future__ import annotations

from jaxrl.data.sft_data import SFTExample

PAD, BOS, EOS = 0, 1, 2


class CharTokenizer:
    """One id per character (3..127, fits the tiny models' 128-token vocabulary); EOS = 2.

    Its chat template writes `<role>content` per message, then `<assistant>` as the generation prompt.
    """

    eos_token_id = EOS
    chat_template = "<role>content"

    def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
        assert not add_special_tokens
        return [3 + ord(c) % 125 for c in text]

    def apply_chat_template(self, messages, tokenize=False, add_generation_prompt=True, **kwargs):
        assert not tokenize and not kwargs
        text = "".join(f"<{m['role']}>{m['content']}" for m in messages)
        return text + ("<assistant>" if add_generation_prompt else "")


def arithmetic_examples(n: int) -> list[SFTExample]:
    """n short chat examples `a+b=` -> `c` with varied lengths."""
    out = []
    for i in range(n):
        a, b = 7 * i + 3, 11 * i * i + 5
        messages = ({"role": "user", "content": f"{a}+{b}="},)
        out.append(SFTExample(f"{a + b} because {a} plus {b}", messages=messages, source=f"ex{i}"))
    return out
