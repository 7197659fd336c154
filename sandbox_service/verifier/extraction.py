"""Split a model completion into its plan (reasoning) and its code, with character spans.

Pure Python with no torch: the trainer uses the spans to give plan tokens and code tokens
different advantages (HRD), and the sandbox's format layer uses the code.

Rules: the candidate is the last fenced Python block (```python, ```py or a bare ```). Fences start
a line; a closing fence may be followed by other text on its line. The plan is the text inside
`<think>...</think>` when present, else the text before that block.
"""

from __future__ import annotations

import dataclasses
import re

# A closing fence may carry text after it ("``` done"), but not a glued language tag or fourth
# backtick: "```python" inside an open block is an opening fence, not the end of the block.
# A fence's opening line (any ``` line; its language is the word after it) and a closing line (``` followed by
# no language character). Blocks are found line by line (_fenced_blocks), never by one regex over the text: a
# lazy body from every unclosed opening to the end made the search quadratic in the completion's length.
_OPENING = re.compile(r"[ \t]*```[ \t]*(?P<lang>[A-Za-z0-9_+-]*)")
_CLOSING = re.compile(r"[ \t]*```(?![A-Za-z0-9_+`-])")
_THINK = re.compile(r"<think>(?P<body>.*?)(?:</think>|\Z)", re.S)
_PYTHON_LANGS = {"", "python", "py", "python3"}


@dataclasses.dataclass(frozen=True)
class Extraction:
    """Where the plan and the code sit in a completion; spans are [start, end) character offsets."""

    code: str | None
    code_span: tuple[int, int] | None
    plan: str
    plan_span: tuple[int, int] | None
    problem: str = ""


@dataclasses.dataclass(frozen=True)
class _Block:
    lang: str
    start: int  # where the opening line starts
    body: tuple[int, int]  # [start, end) of the lines between the fences


def _fenced_blocks(text: str) -> list[_Block]:
    """Each opening line with a line after it, closed by the first closing line below it; scanning goes on
    after the closing line (or, for an opening never closed, from the next line). Linear in the text."""
    lines = text.split("\n")  # only "\n" ends a line here, as for the regex's ^ and $ before
    starts, pos = [], 0
    for line in lines:
        starts.append(pos)
        pos += len(line) + 1
    next_closing: list[int | None] = [None] * (len(lines) + 1)
    for index in range(len(lines) - 1, -1, -1):
        next_closing[index] = index if _CLOSING.match(lines[index]) else next_closing[index + 1]
    blocks, index = [], 0
    while index < len(lines):
        opening = _OPENING.match(lines[index])
        # an opening line needs its line end ("\n"): the last line has none
        closing = next_closing[index + 1] if opening and index + 1 < len(lines) else None
        if closing is None:
            index += 1
            continue
        blocks.append(_Block(opening.group("lang"), starts[index], (starts[index + 1], starts[closing])))
        index = closing + 1
    return blocks


def extract_completion(text: str) -> Extraction:
    blocks = [b for b in _fenced_blocks(text) if b.lang.lower() in _PYTHON_LANGS]
    think = _THINK.search(text)
    plan_span: tuple[int, int] | None = None
    if think:
        plan_span = think.span("body")
    if not blocks:
        problem = "no fenced Python code block"
        if text.count("```") % 2 == 1:
            problem = "unterminated fenced code block (truncated completion?)"
        if plan_span is None and text.strip():
            plan_span = (0, len(text))
        plan = text[plan_span[0] : plan_span[1]] if plan_span else ""
        return Extraction(None, None, plan, plan_span, problem)
    last = blocks[-1]
    code_span = last.body
    if plan_span is None or plan_span[0] >= code_span[0]:
        start = 0
        end = last.start
        plan_span = (start, end) if text[start:end].strip() else None
    else:
        plan_span = (plan_span[0], min(plan_span[1], last.start))
    plan = text[plan_span[0] : plan_span[1]] if plan_span else ""
    return Extraction(text[code_span[0] : code_span[1]], code_span, plan, plan_span)


def looks_like_completion(text: str) -> bool:
    """True when the text holds a fenced block, i.e. it is a model completion rather than a module."""
    return bool(re.search(r"^[ \t]*```", text, re.M))
