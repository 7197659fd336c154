"""Extraction: which fenced block is the code, where it sits, and which lines count as fences."""

from __future__ import annotations

import pytest

from sandbox_service.verifier.extraction import extract_completion


@pytest.mark.parametrize(
    "closing_line",
    ["```", "```  ", "``` done", "```\tdone.", "```.", "```</answer>", "  ``` and that is the kernel"],
)
def test_a_closing_fence_may_carry_text_on_its_line(closing_line):
    text = f"plan\n```python\nx = 1\n{closing_line}\nafter"
    extraction = extract_completion(text)
    assert extraction.code == "x = 1\n"
    assert extraction.code_span == (text.index("x = 1"), text.index("x = 1") + len("x = 1\n"))
    assert extraction.problem == ""


def test_a_closing_fence_with_text_at_the_end_of_the_completion():
    assert extract_completion("```python\nx = 1\n``` done").code == "x = 1\n"


@pytest.mark.parametrize("line", ["```python", "```py", "````", "```c++"])
def test_a_fence_glued_to_a_language_tag_or_a_fourth_backtick_does_not_close_a_block(line):
    text = f"```python\nx = 1\n{line}\ny = 2\n```\n"
    assert extract_completion(text).code == f"x = 1\n{line}\ny = 2\n"


def test_backticks_that_do_not_start_a_line_are_code():
    text = '```python\nx = "```"\ny = 2  # ``` here\n```\n'
    assert extract_completion(text).code == 'x = "```"\ny = 2  # ``` here\n'


def test_the_last_python_block_is_the_code_and_the_plan_is_the_text_before_it():
    text = "first\n```python\nx = 1\n``` then\n```text\nlog\n```\n```py\ny = 2\n``` end"
    extraction = extract_completion(text)
    assert extraction.code == "y = 2\n"
    assert extraction.plan == text[: text.index("```py\n")]


def test_an_unterminated_block_is_reported_as_such():
    extraction = extract_completion("plan\n```python\nx = 1\n")
    assert extraction.code is None and extraction.code_span is None
    assert "unterminated" in extraction.problem
