"""Layer 1: find the candidate code and require a ModelNew and a real @triton.jit kernel."""

from __future__ import annotations

import pytest

from sandbox_service.options import CandidateFormat
from sandbox_service.verifier.format import check_format

KERNEL = """
import triton
import triton.language as tl

@triton.jit
def k(x):
    pass

class ModelNew:
    pass
"""


def rules(text: str, fmt: CandidateFormat = CandidateFormat.AUTO) -> list[str]:
    return [v.rule for v in check_format(text, fmt, 100_000).violations]


def test_module_and_completion_forms():
    assert rules(KERNEL) == []
    assert rules(f"<think>plan</think>\n```python\n{KERNEL}```\ntrailing words") == []
    assert check_format(f"first\n```python\nx = 1\n```\nsecond\n```python\n{KERNEL}```", CandidateFormat.AUTO, 10**5).code.strip().startswith("import triton")


@pytest.mark.parametrize(
    "text, rule",
    [
        ("no code here", "no-code-block"),
        ("```python\nimport triton\n", "no-code-block"),
        ("```python\n   \n```", "empty-code"),
        ("```python\ndef broken(:\n```", "syntax-error"),
        (KERNEL.replace("class ModelNew", "class Model"), "no-model-new"),
        (KERNEL.replace("@triton.jit", ""), "no-triton-kernel"),
        ("x" * 200_000, "too-large"),
    ],
)
def test_rejections(text, rule):
    fmt = CandidateFormat.COMPLETION if text.startswith(("no code", "```")) else CandidateFormat.AUTO
    assert rule in rules(text, fmt)


def test_autotuned_and_imported_jit_count_as_kernels():
    autotuned = KERNEL.replace("@triton.jit", "@triton.autotune(configs=[], key=[])\n@triton.jit")
    from_import = KERNEL.replace("@triton.jit", "@jit").replace("import triton\n", "import triton\nfrom triton import jit\n")
    assert rules(autotuned) == [] and rules(from_import) == []


def test_a_kernel_named_in_a_comment_is_not_a_kernel():
    assert "no-triton-kernel" in rules("# @triton.jit\nclass ModelNew:\n    pass\n")
