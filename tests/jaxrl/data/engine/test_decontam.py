"""Decontamination: a KernelBench problem renamed and reformatted is still KernelBench; our own problems
that KernelBench does not have are kept."""

from __future__ import annotations

import re

import pytest

from jaxrl.data.engine import (
    Decontaminator,
    generate_task,
    generate_tasks,
    input_specs,
    normalized_ast_hash,
)
from jaxrl.data.engine.decontam import InputSpec
from jaxrl.data.engine.families import FAMILIES

KEY = "L2/12_Gemm_Multiply_LeakyReLU"


@pytest.fixture(scope="module")
def kernelbench(kernelbench_rows) -> dict[str, str]:
    return {f"L{r['level']}/{r['name']}": r["code"] for r in kernelbench_rows}


@pytest.fixture(scope="module")
def decontaminator(kernelbench) -> Decontaminator:
    return Decontaminator(kernelbench)


def disguise(code: str) -> str:
    """The problem with every defined name renamed, other sizes, new comments and docstrings, 2-space indents."""
    names = {"Model": "GemmNet", "in_features": "d_in", "out_features": "d_out", "multiplier": "alpha",
             "negative_slope": "slope", "gemm": "fc", "leaky_relu": "act", "x": "inp", "batch_size": "bs"}
    for old, new in names.items():
        code = re.sub(rf"\b{old}\b", new, code)
    code = re.sub(r"\b(1024|8192)\b", lambda m: {"1024": "77", "8192": "333"}[m.group(1)], code)
    code = code.replace("2.0", "0.5").replace("0.1", "0.2")
    code = re.sub(r'"""[^"]*"""', '"""A disguised copy of a benchmark problem."""', code)
    code = code.replace("def forward", "# forward pass, commented\n    def forward")
    return "\n".join(re.sub(r"^((?:    )+)", lambda m: "  " * (len(m.group(1)) // 4), line)
                     for line in code.splitlines()) + "\n# trailing comment\n"


def test_a_renamed_and_reformatted_kernelbench_problem_is_caught_by_the_ast_hash(kernelbench, decontaminator):
    disguised = disguise(kernelbench[KEY])
    assert "GemmNet" in disguised and "multiplier" not in disguised and "8192" not in disguised
    found = decontaminator.match(disguised)
    assert found is not None and found.problem == KEY and found.matcher == "ast-hash"
    assert found.ops == ("matmul", "add", "mul", "leaky_relu")


def test_the_same_operators_on_the_same_kinds_of_inputs_are_caught_by_the_signature(decontaminator):
    mine = ("import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n\n"
            "class Model(nn.Module):\n    def __init__(self):\n        super().__init__()\n\n"
            "    def forward(self, t):\n        return F.relu(t)\n\n"
            "def get_inputs():\n    t = torch.randn(17, 33)\n    return [t]\n\ndef get_init_inputs():\n    return []\n")
    found = decontaminator.match(mine)
    assert found is not None and found.problem == "L1/19_ReLU" and found.matcher == "signature"
    # The same operator on another rank or dtype is another problem (counted only as op-sequence overlap).
    for other in ("torch.randn(17, 33, 5)", "torch.randn(17, 33, dtype=torch.float16)"):
        variant = mine.replace("torch.randn(17, 33)", other)
        assert decontaminator.match(variant) is None
        assert "L1/19_ReLU" in decontaminator.same_op_sequence(variant)


def test_generated_tasks_kernelbench_does_not_have_are_kept(decontaminator):
    # families whose operator sequences appear nowhere in KernelBench, whichever spelling a draw's reference takes
    # (an operator by name or as an explicit expression: one draw alone can hide a family KernelBench has)
    absent = [name for name in FAMILIES if not FAMILIES[name].composition
              and not any(decontaminator.same_op_sequence(generate_task(name, seed, "cpu").code) for seed in range(12))]
    assert {"cummax", "index_select", "gather", "permute", "l2_norm"} <= set(absent)
    tasks = generate_tasks(seed=5, count=2 * len(absent), scale="full", families=absent)
    kept, dropped = decontaminator.split(tasks)
    assert dropped == [] and kept == tasks


def test_every_match_is_the_same_op_sequence_and_the_report_adds_up(decontaminator):
    tasks = generate_tasks(seed=11, count=2 * len(FAMILIES), scale="full")
    report = decontaminator.report(tasks)
    kept, dropped = decontaminator.split(tasks)
    assert report.total == len(tasks) and report.kept == len(kept)
    assert report.ast_matches + report.signature_matches == len(dropped) == sum(report.by_problem.values())
    assert report.op_sequence_overlap >= len(dropped)
    for task, found in dropped:
        assert found.ops == task.ops and found.problem in decontaminator.same_op_sequence(task.code)
    assert report.kept > report.total // 2, report.summary()
    assert report.references == 270 and report.unreadable_references == 0


def test_the_hash_ignores_names_numbers_docstrings_and_hints_but_not_operators():
    base = ("import torch\nclass M:\n    'doc'\n    def forward(self, x: torch.Tensor, k: int = 3):\n"
            "        y = torch.relu(x) * k\n        return y.sum(dim=1)\nN = 4\n")
    same = base.replace("'doc'", "'other doc'").replace("x", "z").replace("y", "w").replace("N = 4", "SIZE = 9") \
        .replace(": torch.Tensor", "").replace(": int", "").replace("3", "5")
    assert normalized_ast_hash(base) == normalized_ast_hash(same)
    assert normalized_ast_hash(base) != normalized_ast_hash(base.replace("torch.relu", "torch.sigmoid"))
    assert normalized_ast_hash(base) != normalized_ast_hash(base.replace(".sum(", ".mean("))


def test_input_specs_read_kernelbench_forms(kernelbench):
    tensor = lambda rank, dtype: InputSpec(True, rank, dtype)  # noqa: E731
    assert input_specs(kernelbench["L1/95_CrossEntropyLoss"]) == (tensor(2, "float32"), tensor(1, "int64"))
    assert input_specs(kernelbench["L1/100_HingeLoss"]) == (tensor(2, "float32"), tensor(1, "float32"))
    assert input_specs(kernelbench["L1/19_ReLU"]) == (tensor(2, "float32"),)
    half = ("def get_inputs():\n    a = torch.randn(2, 3).half()\n"
            "    return [a, torch.rand(4, dtype=torch.bfloat16), 3]\n")
    assert input_specs(half) == (tensor(2, "float16"), tensor(1, "bfloat16"), InputSpec(False))


def test_no_references_is_an_error():
    with pytest.raises(ValueError, match="no reference sources"):
        Decontaminator({})
