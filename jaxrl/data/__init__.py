"""Tasks and training data: KernelBench problems (full and CPU-sized), prompts, SFT examples.

Nothing here imports torch or jax; `cpu_sized.validate` runs torch in a subprocess. KernelBench is
found (or downloaded once) by `kernelbench_source`.
"""

from jaxrl.data.kernelbench import (
    KernelBenchUnavailable,
    Problem,
    default_source,
    load_problems,
    problem_key,
    resolve_kernelbench,
)
from jaxrl.data.prompts import PromptTemplate, build_messages, format_answer, load_template, render_prompt
from jaxrl.data.sft_data import SFTExample, kernelbook_examples, read_jsonl, read_kernelbook

__all__ = [
    "KernelBenchUnavailable",
    "Problem",
    "PromptTemplate",
    "SFTExample",
    "build_messages",
    "default_source",
    "format_answer",
    "kernelbook_examples",
    "load_problems",
    "load_template",
    "problem_key",
    "read_jsonl",
    "read_kernelbook",
    "render_prompt",
    "resolve_kernelbench",
]
