"""Task prompts in the TritonRL style, and the answer format they ask for.

The wording lives in `prompt_template.md` (one file, reviewed like code); this module fills it in
per task and renders it through a tokenizer's chat template. Evaluation, SFT and GRPO all build
their prompts here, so a model is trained on exactly the prompt it is evaluated with.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path
from typing import Any

TEMPLATE_PATH = Path(__file__).with_name("prompt_template.md")
_ROLE_MARKER = re.compile(r"^<!-- role: (?P<role>\w+) -->[ \t]*\n", re.M)
_ROLES = ("system", "user", "assistant")
_PLACEHOLDERS = ("{{MODEL_NAME}}", "{{NEW_MODEL_NAME}}", "{{REFERENCE_CODE}}")
# One pass over all placeholders, so a placeholder-like string inside the reference code stays as it is.
_PLACEHOLDER = re.compile("|".join(re.escape(p) for p in _PLACEHOLDERS))

Message = dict[str, str]


@dataclasses.dataclass(frozen=True)
class PromptTemplate:
    """Chat messages with placeholders: (role, text) pairs in order."""

    messages: tuple[tuple[str, str], ...]

    def __post_init__(self) -> None:
        if not self.messages:
            raise ValueError("prompt template has no messages")
        for role, _ in self.messages:
            if role not in _ROLES:
                raise ValueError(f"prompt template: unknown role {role!r} (expected one of {_ROLES})")
        text = "".join(body for _, body in self.messages)
        if "{{REFERENCE_CODE}}" not in text:
            raise ValueError("prompt template never shows the reference: {{REFERENCE_CODE}} is missing")

    @classmethod
    def parse(cls, text: str) -> PromptTemplate:
        """Split a template file at its `<!-- role: NAME -->` lines (text before the first is ignored)."""
        markers = list(_ROLE_MARKER.finditer(text))
        messages = []
        for marker, following in zip(markers, markers[1:] + [None]):
            end = following.start() if following else len(text)
            messages.append((marker["role"], text[marker.end() : end].strip("\n")))
        return cls(tuple(messages))


def load_template(path: str | Path = TEMPLATE_PATH) -> PromptTemplate:
    return PromptTemplate.parse(Path(path).read_text(encoding="utf-8"))


def build_messages(
    reference_code: str,
    model_name: str = "Model",
    new_model_name: str | None = None,
    template: PromptTemplate | None = None,
    system: bool = True,
) -> list[Message]:
    """Chat messages asking for a Triton rewrite of `reference_code`.

    `model_name` is the class to rewrite (`Model` in KernelBench; KernelBook rows name their own),
    `new_model_name` the class the answer must define (default: model_name + "New"). With
    `system=False` the system message is dropped, for chat templates that reject one.
    """
    if not reference_code.strip():
        raise ValueError("reference code is empty")
    for name in (model_name, new_model_name):
        if name is not None and not name.isidentifier():
            raise ValueError(f"class name must be a Python identifier, got {name!r}")
    template = template or load_template()
    values = {
        "{{MODEL_NAME}}": model_name,
        "{{NEW_MODEL_NAME}}": new_model_name or f"{model_name}New",
        "{{REFERENCE_CODE}}": reference_code.strip("\n"),
    }
    messages = []
    for role, body in template.messages:
        if role == "system" and not system:
            continue
        messages.append({"role": role, "content": _PLACEHOLDER.sub(lambda m: values[m.group(0)], body)})
    return messages


def render_prompt(
    tokenizer: Any, messages: list[Message], add_generation_prompt: bool = True, **template_kwargs: Any
) -> str:
    """The prompt text through the tokenizer's chat template (any object with `apply_chat_template`).

    Extra keyword arguments go to the template (e.g. `enable_thinking=True` for Qwen3).
    """
    apply = getattr(tokenizer, "apply_chat_template", None)
    if apply is None:
        raise TypeError(f"{type(tokenizer).__name__} has no apply_chat_template; pass a chat tokenizer")
    if getattr(tokenizer, "chat_template", "unset") is None:
        raise ValueError(f"{type(tokenizer).__name__} has no chat template (tokenizer.chat_template is None)")
    text = apply(messages, tokenize=False, add_generation_prompt=add_generation_prompt, **template_kwargs)
    if not isinstance(text, str):
        raise TypeError(f"apply_chat_template returned {type(text).__name__}, expected str")
    return text


def format_answer(code: str, reasoning: str = "") -> str:
    """A completion in the requested format: `<think>reasoning</think>` then one fenced Python block.

    Used for SFT targets; `sandbox_service.verifier.extraction` reads the same format back.
    """
    if not code.strip():
        raise ValueError("answer code is empty")
    return f"<think>\n{reasoning.strip()}\n</think>\n```python\n{code.strip(chr(10))}\n```"
