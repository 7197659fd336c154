"""Every family writes a valid KernelBench reference at both scales, with the signature it declares,
sizes within its scale, input sets, and more than one spelling of the same operators."""

from __future__ import annotations

import ast
import math
import random

import pytest

from jaxrl.data.engine import generate_task, op_signature
from jaxrl.data.engine.families import FAMILIES, get_family
from jaxrl.data.engine.families.sizes import CPU_MAX_NUMEL, matmul_sizes
from jaxrl.data.engine.inputs import ITEMSIZE

SAMPLES = 2


@pytest.fixture(scope="module")
def tasks():
    return {(name, scale): [generate_task(name, seed, scale) for seed in range(SAMPLES)]
            for name in FAMILIES for scale in ("cpu", "full")}


def top_level(code: str) -> dict[str, ast.AST]:
    return {node.name: node for node in ast.parse(code).body if isinstance(node, (ast.ClassDef, ast.FunctionDef))}


@pytest.mark.parametrize("name", list(FAMILIES))
def test_references_are_kernelbench_modules_with_the_declared_signature(tasks, name):
    family = get_family(name)
    for scale in ("cpu", "full"):
        for task in tasks[(name, scale)]:
            defs = top_level(task.code)
            assert {"Model", "get_inputs", "get_init_inputs"} <= set(defs), task.code
            model = defs["Model"]
            assert [ast.unparse(base) for base in model.bases] == ["nn.Module"]
            assert ast.get_docstring(model), "the class has a docstring"
            assert {f.name for f in model.body if isinstance(f, ast.FunctionDef)} >= {"__init__", "forward"}
            assert "import torch.nn as nn" in task.code and "device" not in task.code and "cuda" not in task.code
            if task.params.get("expressed"):  # some operators written as their math: the signature is the arithmetic's
                signature = op_signature(task.code)
                for op in set(task.params["expressed"]):
                    assert signature.count(op) < task.ops.count(op), (op, task.code)
            else:
                assert op_signature(task.code) == task.ops
            if family.composition:
                recipe = tuple(task.params["recipe"])
                assert recipe in family.recipes() and task.ops == family.recipe_ops(recipe)
                assert 2 <= len(task.ops) <= 4 and set(task.ops) <= set(family.ops)
            else:
                assert task.ops == family.ops
            assert task.difficulty in family.difficulties and task.family == name and task.scale == scale


@pytest.mark.parametrize("name", list(FAMILIES))
def test_sizes_and_dtypes_fit_the_scale(tasks, name):
    for task in tasks[(name, "cpu")]:
        assert task.dtype in ("float32", "float16"), "the interpreter mishandles bf16"
        assert max(math.prod(shape) for shape in task.params["shapes"].values()) <= CPU_MAX_NUMEL
    for task in tasks[(name, "full")]:
        shapes = task.params["shapes"].values()
        total_bytes = sum(math.prod(s) * ITEMSIZE[task.dtype] for s in shapes)
        assert total_bytes <= 1 << 30
        if "matmul" in task.ops:
            continue  # sized by flops below
        assert max(math.prod(shape) for shape in shapes) >= 1 << 22, (name, task.params)


def test_matmul_sizes_are_large_enough_to_time_at_full_scale():
    rng = random.Random(0)
    for dtype, floor in (("float32", 1 << 29), ("float16", 1 << 31)):
        for batched in (False, True):
            batch, m, n, k = matmul_sizes(rng, "full", dtype, batched)
            assert batch * m * n * k >= floor


@pytest.mark.parametrize("name", list(FAMILIES))
def test_each_task_has_input_sets_that_redefine_get_inputs(tasks, name):
    for task in tasks[(name, "cpu")] + tasks[(name, "full")]:
        names = [s.name for s in task.input_sets]
        assert len(set(names)) == len(names) and 2 <= len(names) <= 3
        default = ast.unparse(top_level(task.code)["get_inputs"])
        for input_set in task.input_sets:
            defs = top_level(input_set.source)
            assert "get_inputs" in defs and ast.unparse(defs["get_inputs"]) != default
            assert set(defs) <= {"get_inputs", "get_init_inputs"} and "device" not in input_set.source


def test_one_operator_is_written_in_several_ways():
    forwards = set()
    for seed in range(40):
        model = top_level(generate_task("relu", seed, "cpu").code)["Model"]
        forward = next(f for f in model.body if isinstance(f, ast.FunctionDef) and f.name == "forward")
        forwards.add(ast.unparse(forward.body[-1]))
    assert len(forwards) >= 4, forwards
    assert any("self." in f for f in forwards) and any("F.relu" in f for f in forwards)


def test_weights_are_built_from_init_arguments_the_solution_repeats():
    task = generate_task("linear", 0, "cpu")
    init, solution_init = (next(f for f in cls.body if isinstance(f, ast.FunctionDef) and f.name == "__init__")
                           for cls in (top_level(task.code)["Model"], top_level(task.solution.code)["ModelNew"]))
    assert [a.arg for a in init.args.args] == [a.arg for a in solution_init.args.args]
    linear_line = next(ast.unparse(s) for s in init.body if "nn.Linear" in ast.unparse(s))
    assert linear_line in [ast.unparse(s) for s in solution_init.body]


def test_epilogue_parameters_named_like_the_kernels_own_registers_get_a_solution():
    """A GEMM epilogue operand named `bias` beside nn.Linear's own bias once made the teacher declare
    `bias_ptr` twice (seed 7 draws it); every draw must have its solution."""
    from jaxrl.data.engine.generator import generate_tasks

    for scale in ("cpu", "full"):
        tasks = generate_tasks(7, 150, scale, families=["gemm_epilogue"])
        assert all(t.solution is not None and t.teacher_error is None for t in tasks), \
            [t.teacher_error for t in tasks if t.teacher_error][:3]


def test_a_teacher_failure_costs_the_solution_not_the_task(monkeypatch):
    from jaxrl.data.engine.families import base

    def broken(program, reference, scale, rng=None):
        raise ValueError("no template for this")

    monkeypatch.setattr(base, "write_solution", broken)
    task = generate_task("relu", seed=3)
    assert task.solution is None and task.teacher_error == "ValueError: no template for this"
    assert task.code and task.input_sets


def test_the_first_input_set_is_larger_than_the_default_where_the_limits_leave_room():
    """So that a kernel hard-coding the default sizes leaves outputs unwritten instead of computing every
    element of smaller tensors by reading and writing past them."""
    import torch

    def numel(source: str) -> int:
        namespace: dict = {}
        exec(source, namespace)
        return sum(x.numel() for x in namespace["get_inputs"]() if isinstance(x, torch.Tensor))

    not_larger = []
    for name in FAMILIES:
        for seed in range(3):
            task = generate_task(name, seed, "cpu")
            default, first = numel(task.code), numel(task.code + "\n\n" + task.input_sets[0].source)
            if first <= default:
                not_larger.append((name, seed, default, first))
    assert all(default > CPU_MAX_NUMEL * 3 // 4 for _, _, default, _ in not_larger), not_larger
    assert len(not_larger) <= 0.05 * 3 * len(FAMILIES), not_larger
