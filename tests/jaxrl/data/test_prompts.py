"""Prompts: the template file, filling it per task, chat-template rendering and the answer format."""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
import textwrap

import pytest

from jaxrl.data.prompts import PromptTemplate, build_messages, format_answer, load_template, render_prompt
from sandbox_service.verifier.extraction import extract_completion

REFERENCE = "import torch\nimport torch.nn as nn\n\nclass Model(nn.Module):\n    pass\n"


def test_template_file_has_a_system_and_a_user_message():
    template = load_template()
    assert [role for role, _ in template.messages] == ["system", "user"]
    assert "<!--" not in "".join(body for _, body in template.messages)


def test_messages_show_the_reference_rules_and_answer_format(kernelbench_rows):
    code = kernelbench_rows[18]["code"]  # level 1, 19_ReLU
    messages = build_messages(code)
    assert [m["role"] for m in messages] == ["system", "user"]
    user = messages[1]["content"]
    assert f"```python\n{code.strip()}\n```" in user
    assert user.rstrip().endswith("```")  # the reference is the last thing the model reads
    assert "{{" not in user and "}}" not in user
    for phrase in ("`Model`", "`ModelNew`", "@triton.jit", "<think>", "exactly one fenced ```python code block"):
        assert phrase in user
    assert "not even as a fallback" in user  # the no-torch-compute rule


def test_kernelbook_style_class_names_are_substituted():
    user = build_messages(REFERENCE.replace("Model", "SumAggregator"), model_name="SumAggregator")[1]["content"]
    assert "named `SumAggregator`" in user and "Write `SumAggregatorNew`" in user
    assert "named `Model`" not in user
    with pytest.raises(ValueError, match="identifier"):
        build_messages(REFERENCE, model_name="not a name")


def test_placeholder_text_inside_the_reference_is_left_alone():
    code = REFERENCE + "# {{MODEL_NAME}} {{REFERENCE_CODE}}\n"
    user = build_messages(code)[1]["content"]
    assert "# {{MODEL_NAME}} {{REFERENCE_CODE}}" in user


def test_system_message_can_be_dropped():
    assert [m["role"] for m in build_messages(REFERENCE, system=False)] == ["user"]


def test_template_parsing_errors():
    with pytest.raises(ValueError, match="REFERENCE_CODE"):
        PromptTemplate.parse("<!-- role: user -->\nno reference here\n")
    with pytest.raises(ValueError, match="unknown role 'narrator'"):
        PromptTemplate.parse("<!-- role: narrator -->\n{{REFERENCE_CODE}}\n")
    with pytest.raises(ValueError, match="no messages"):
        PromptTemplate.parse("just text\n")
    with pytest.raises(ValueError, match="empty"):
        build_messages("  \n")


class RecordingTokenizer:
    chat_template = "{{ messages }}"

    def __init__(self):
        self.calls = []

    def apply_chat_template(self, messages, **kwargs):
        self.calls.append((messages, kwargs))
        return "|".join(f"{m['role']}:{m['content'][:5]}" for m in messages) + ("|assistant:" if kwargs["add_generation_prompt"] else "")


def test_render_prompt_passes_messages_and_template_options():
    tokenizer = RecordingTokenizer()
    messages = build_messages(REFERENCE)
    text = render_prompt(tokenizer, messages, enable_thinking=True)
    assert text == "system:You a|user:Below|assistant:"
    assert tokenizer.calls == [(messages, {"tokenize": False, "add_generation_prompt": True, "enable_thinking": True})]


def test_render_prompt_with_a_real_transformers_chat_template():
    tokenizers = pytest.importorskip("tokenizers")
    transformers = pytest.importorskip("transformers")
    backend = tokenizers.Tokenizer(tokenizers.models.WordLevel({"<unk>": 0}, unk_token="<unk>"))
    tokenizer = transformers.PreTrainedTokenizerFast(tokenizer_object=backend)
    tokenizer.chat_template = (
        "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
        "{% if add_generation_prompt %}<|im_start|>assistant\n{% if enable_thinking is defined and not enable_thinking %}"
        "<think>\n\n</think>\n\n{% endif %}{% endif %}"
    )
    messages = build_messages(REFERENCE)
    text = render_prompt(tokenizer, messages)
    assert text.startswith("<|im_start|>system\nYou are an expert GPU programmer.")
    assert text.endswith(f"```python\n{REFERENCE.strip()}\n```<|im_end|>\n<|im_start|>assistant\n")
    assert render_prompt(tokenizer, messages, enable_thinking=False).endswith("assistant\n<think>\n\n</think>\n\n")


def test_render_prompt_rejects_tokenizers_without_a_chat_template():
    with pytest.raises(TypeError, match="apply_chat_template"):
        render_prompt(object(), build_messages(REFERENCE))
    tokenizer = RecordingTokenizer()
    tokenizer.chat_template = None
    with pytest.raises(ValueError, match="no chat template"):
        render_prompt(tokenizer, build_messages(REFERENCE))


def test_format_answer_is_read_back_by_the_sandbox_extractor():
    code = "import torch\n\nclass ModelNew(torch.nn.Module):\n    pass"
    answer = format_answer(code + "\n\n", reasoning="  Plan: one kernel.\n")
    assert answer == f"<think>\nPlan: one kernel.\n</think>\n```python\n{code}\n```"
    extraction = extract_completion(answer)
    assert extraction.code.rstrip("\n") == code
    assert extraction.plan.strip() == "Plan: one kernel."
    with pytest.raises(ValueError, match="empty"):
        format_answer("\n")


def example_code() -> str:
    user = load_template().messages[1][1]
    blocks = re.findall(r"```python\n(.*?)```", user, re.S)
    assert len(blocks) == 2, "expected the example answer and the reference block"
    return blocks[0]


def test_the_example_answer_is_a_real_triton_module_that_computes_a_plus_b(tmp_path):
    code = example_code()
    tree = ast.parse(code)
    assert "ModelNew" in {n.name for n in tree.body if isinstance(n, ast.ClassDef)}
    assert "@triton.jit" in code
    (tmp_path / "example.py").write_text(code)
    check = textwrap.dedent(
        """
        import torch, example
        a, b = torch.rand(3000), torch.rand(3000)
        assert torch.equal(example.ModelNew()(a, b), a + b)
        print("ok")
        """
    )
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": str(tmp_path)}
    result = subprocess.run([sys.executable, "-c", check], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=240)
    assert result.returncode == 0 and result.stdout.strip() == "ok", result.stderr[-2000:]
