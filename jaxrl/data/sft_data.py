"""SFT examples from JSONL files: chat transcripts, prompt/completion pairs, or KernelBook rows.

Every reader returns `SFTExample`s: a prompt (chat messages, or text already rendered) and the
completion to learn. KernelBook rows (`python_code`, `triton_code`, optional reasoning) get the same
prompt as evaluation (`prompts.build_messages`) and a completion in the answer format the prompt
asks for (`prompts.format_answer`), so SFT teaches exactly what evaluation asks. Tokenisation and
packing happen elsewhere.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from jaxrl.data.jsonl import read_objects
from jaxrl.data.prompts import PromptTemplate, build_messages, format_answer

_ROLES = ("system", "user", "assistant")
_REASONING_KEYS = ("reasoning", "thinking")


@dataclasses.dataclass(frozen=True)
class SFTExample:
    """One training pair. Exactly one of `messages` (to render with a chat template) and
    `prompt_text` (already rendered) is set; `completion` is the assistant's text to learn."""

    completion: str
    messages: tuple[dict[str, str], ...] | None = None
    prompt_text: str | None = None
    source: str = ""

    def __post_init__(self) -> None:
        where = f" ({self.source})" if self.source else ""
        if (self.messages is None) == (self.prompt_text is None):
            raise ValueError(f"SFTExample needs exactly one of messages and prompt_text{where}")
        if not isinstance(self.completion, str) or not self.completion.strip():
            raise ValueError(f"SFTExample has an empty completion{where}")
        if self.prompt_text is not None and not (isinstance(self.prompt_text, str) and self.prompt_text.strip()):
            raise ValueError(f"SFTExample has an empty prompt{where}")
        if self.messages is not None:
            object.__setattr__(self, "messages", tuple(_check_message(m, where) for m in self.messages))
            if not self.messages:
                raise ValueError(f"SFTExample has no prompt messages{where}")


def _check_message(message: Any, where: str) -> dict[str, str]:
    if not isinstance(message, dict) or not {"role", "content"} <= set(message):
        raise ValueError(f"chat message must be an object with role and content, got {message!r:.80}{where}")
    role, content = message["role"], message["content"]
    if role not in _ROLES:
        raise ValueError(f"unknown chat role {role!r} (expected one of {_ROLES}){where}")
    if not isinstance(content, str):
        raise ValueError(f"chat message content must be a string{where}")
    return {"role": role, "content": content}


def read_jsonl(path: str | Path) -> list[SFTExample]:
    """Rows of one of these forms (mixed freely):

    * `{"messages": [..., {"role": "assistant", "content": C}]}`: the last message is the completion;
    * `{"prompt": "text", "completion": "text"}`: a rendered prompt;
    * `{"prompt": [messages], "completion": [{"role": "assistant", "content": C}] or "C"}`
      (TRL's conversational prompt-completion layout).
    """
    return [example_from_row(row, where) for row, where in _rows(path)]


def example_from_row(row: dict[str, Any], where: str = "") -> SFTExample:
    if "messages" in row:
        messages = row["messages"]
        if not isinstance(messages, list) or len(messages) < 2:
            raise ValueError(f"{where}: messages must be a list of at least a prompt and an answer")
        last = _check_message(messages[-1], f" ({where})")
        if last["role"] != "assistant":
            raise ValueError(f"{where}: the last message must be the assistant's answer, got role {last['role']!r}")
        return SFTExample(last["content"], messages=tuple(messages[:-1]), source=where)
    if "prompt" in row and "completion" in row:
        completion = row["completion"]
        if isinstance(completion, list):
            if len(completion) != 1:
                raise ValueError(f"{where}: completion must hold exactly one assistant message")
            message = _check_message(completion[0], f" ({where})")
            if message["role"] != "assistant":
                raise ValueError(f"{where}: completion message must have role assistant")
            completion = message["content"]
        prompt = row["prompt"]
        if isinstance(prompt, list):
            return SFTExample(completion, messages=tuple(prompt), source=where)
        return SFTExample(completion, prompt_text=prompt, source=where)
    raise ValueError(f"{where}: expected 'messages', or 'prompt' and 'completion'; got keys {sorted(row)}")


def read_kernelbook(path: str | Path, template: PromptTemplate | None = None) -> list[SFTExample]:
    """KernelBook-style JSONL rows (see `kernelbook_examples`)."""
    return kernelbook_examples(_rows(path), template)


def kernelbook_examples(
    rows: Iterable[tuple[dict[str, Any], str] | dict[str, Any]], template: PromptTemplate | None = None
) -> list[SFTExample]:
    """Rows with `python_code` and `triton_code`, optionally `reasoning` or `thinking` and `entry_point`.

    `entry_point` names the reference class (KernelBook modules have their own names; the Triton
    version is `<entry_point>New`); without it the KernelBench names `Model`/`ModelNew` are used.
    """
    examples = []
    for index, item in enumerate(rows):
        row, where = item if isinstance(item, tuple) else (item, f"row {index}")
        missing = [k for k in ("python_code", "triton_code") if not isinstance(row.get(k), str) or not row[k].strip()]
        if missing:
            raise ValueError(f"{where}: KernelBook row needs non-empty {' and '.join(missing)}")
        reasoning = next((row[k] for k in _REASONING_KEYS if row.get(k)), "")
        if not isinstance(reasoning, str):
            raise ValueError(f"{where}: reasoning must be a string")
        model_name = row.get("entry_point") or "Model"
        messages = build_messages(row["python_code"], model_name=model_name, template=template)
        examples.append(SFTExample(format_answer(row["triton_code"], reasoning), messages=tuple(messages), source=where))
    return examples


def _rows(path: str | Path) -> Iterator[tuple[dict[str, Any], str]]:
    if not Path(path).is_file():
        raise FileNotFoundError(f"SFT data file not found: {path}")
    yield from read_objects(path)
