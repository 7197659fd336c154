"""SFT data readers: chat transcripts, prompt/completion pairs and KernelBook rows."""

from __future__ import annotations

import json

import pytest

from jaxrl.data.prompts import build_messages
from jaxrl.data.sft_data import SFTExample, kernelbook_examples, read_jsonl, read_kernelbook
from sandbox_service.verifier.extraction import extract_completion

PYTHON_CODE = "import torch\nimport torch.nn as nn\n\nclass SumAggregator(nn.Module):\n    def forward(self, x):\n        return x.sum(1)\n"
TRITON_CODE = "import triton\n\nclass SumAggregatorNew(nn.Module):\n    pass\n"


def write(path, rows):
    path.write_text("".join((row if isinstance(row, str) else json.dumps(row)) + "\n" for row in rows))
    return path


def test_the_three_jsonl_layouts(tmp_path):
    path = write(
        tmp_path / "sft.jsonl",
        [
            {"messages": [{"role": "system", "content": "S"}, {"role": "user", "content": "U"}, {"role": "assistant", "content": "A"}]},
            "",
            {"prompt": "rendered prompt", "completion": "C"},
            {"prompt": [{"role": "user", "content": "U2"}], "completion": [{"role": "assistant", "content": "C2"}]},
            {"prompt": [{"role": "user", "content": "U3"}], "completion": "C3"},
        ],
    )
    examples = read_jsonl(path)
    assert examples[0] == SFTExample("A", messages=({"role": "system", "content": "S"}, {"role": "user", "content": "U"}), source=f"{path}:1")
    assert (examples[1].prompt_text, examples[1].messages, examples[1].completion) == ("rendered prompt", None, "C")
    assert examples[2].messages == ({"role": "user", "content": "U2"},) and examples[2].completion == "C2"
    assert examples[3].completion == "C3"
    assert [e.source for e in examples] == [f"{path}:{n}" for n in (1, 3, 4, 5)]


@pytest.mark.parametrize(
    "row, message",
    [
        ("{oops", r"sft.jsonl:1: not valid JSON"),
        ({"text": "x"}, r"sft.jsonl:1: expected 'messages', or 'prompt' and 'completion'"),
        ({"messages": [{"role": "user", "content": "U"}]}, "at least a prompt and an answer"),
        ({"messages": [{"role": "user", "content": "U"}, {"role": "user", "content": "V"}]}, "last message must be the assistant"),
        ({"messages": [{"role": "robot", "content": "U"}, {"role": "assistant", "content": "A"}]}, "unknown chat role 'robot'"),
        ({"messages": [{"content": "U"}, {"role": "assistant", "content": "A"}]}, "role and content"),
        ({"prompt": "P", "completion": "  "}, "empty completion"),
        ({"prompt": "", "completion": "C"}, "empty prompt"),
        ({"prompt": "P", "completion": [{"role": "user", "content": "C"}]}, "role assistant"),
    ],
)
def test_bad_rows_are_reported_with_their_line(tmp_path, row, message):
    with pytest.raises(ValueError, match=message):
        read_jsonl(write(tmp_path / "sft.jsonl", [row]))


def test_missing_file(tmp_path):
    with pytest.raises(FileNotFoundError, match="absent.jsonl"):
        read_jsonl(tmp_path / "absent.jsonl")


def test_kernelbook_rows_get_the_evaluation_prompt_and_the_answer_format(tmp_path):
    path = write(
        tmp_path / "kernelbook.jsonl",
        [
            {"python_code": PYTHON_CODE, "triton_code": TRITON_CODE, "entry_point": "SumAggregator", "reasoning": "Sum rows."},
            {"python_code": PYTHON_CODE.replace("SumAggregator", "Model"), "triton_code": TRITON_CODE, "thinking": "T"},
            {"python_code": PYTHON_CODE, "triton_code": TRITON_CODE, "uuid": 7},
        ],
    )
    first, second, third = read_kernelbook(path)
    assert list(first.messages) == build_messages(PYTHON_CODE, model_name="SumAggregator")
    assert first.completion == f"<think>\nSum rows.\n</think>\n```python\n{TRITON_CODE.strip()}\n```"
    extraction = extract_completion(first.completion)
    assert extraction.code.strip() == TRITON_CODE.strip() and extraction.plan.strip() == "Sum rows."
    assert list(second.messages) == build_messages(PYTHON_CODE.replace("SumAggregator", "Model"))
    assert second.completion.startswith("<think>\nT\n</think>")
    assert third.completion.startswith("<think>\n\n</think>\n```python")  # no reasoning: an empty plan
    assert third.source == f"{path}:3"


def test_kernelbook_rows_need_both_codes():
    with pytest.raises(ValueError, match="row 0: KernelBook row needs non-empty triton_code"):
        kernelbook_examples([{"python_code": PYTHON_CODE, "triton_code": ""}])


def test_example_needs_exactly_one_prompt_form():
    with pytest.raises(ValueError, match="exactly one"):
        SFTExample("C")
    with pytest.raises(ValueError, match="exactly one"):
        SFTExample("C", messages=({"role": "user", "content": "U"},), prompt_text="P")
