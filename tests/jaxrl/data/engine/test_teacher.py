"""The teacher's solutions: strict-verifier clean, correct under the Triton interpreter on the reference's
inputs and on every input set, and general (a kernel that hard-codes the problem's shapes is not)."""

from __future__ import annotations

import ast
import re

import pytest

from engine_checks import evaluate_many, failures, run_direct, variants
from jaxrl.data.engine import generate_task, generate_tasks
from jaxrl.data.engine.families import FAMILIES
from jaxrl.data.engine.families.sizes import CPU_MAX_NUMEL
from sandbox_service.evaluation import evaluate_local
from sandbox_service.options import EvalOptions, Policy
from sandbox_service.verifier.format import check_format
from sandbox_service.verifier.static_rules import check_static

OPTIONS = EvalOptions(trials=2, time=False)


def top_level(code: str) -> dict[str, ast.AST]:
    return {n.name: n for n in ast.parse(code).body if isinstance(n, (ast.ClassDef, ast.FunctionDef))}


def init_args(cls: ast.ClassDef) -> list[str]:
    init = next(f for f in cls.body if isinstance(f, ast.FunctionDef) and f.name == "__init__")
    return [a.arg for a in init.args.args]
# One family per kind of kernel the teacher writes.
TEMPLATED = [name for name, family in FAMILIES.items() if family.templated]
FAST_FAMILIES = ["div", "argmax", "softmax", "layer_norm", "cumprod", "permute", "gather", "cross_entropy",
                 "gemm_epilogue", "reduce_chain", "gemm_rowop"]


@pytest.mark.parametrize("scale", ["cpu", "full"])
def test_every_solution_passes_the_format_and_strict_static_layers(scale):
    for name in TEMPLATED:
        for seed in range(2):
            task = generate_task(name, seed, scale)
            assert not check_format(task.solution.code, OPTIONS.candidate_format, OPTIONS.max_source_bytes).violations
            assert check_static(task.solution.code, Policy.STRICT, task.code) == [], (name, task.solution.code)


def test_solutions_keep_the_interface_and_plans_carry_the_math_and_the_decisions():
    """Every plan states the input shapes, the formula of every operator of the reference, the kernel
    count and the memory traffic; the code has exactly the kernels the plan announces."""
    from jaxrl.data.engine.teacher.plan import math_lines

    styles = set()
    for task in generate_tasks(seed=4, count=len(FAMILIES), scale="full", families=TEMPLATED):
        reference, solution = top_level(task.code), top_level(task.solution.code)
        assert "ModelNew" in solution
        kernels = [n for n in solution.values() if isinstance(n, ast.FunctionDef) and n.decorator_list]
        assert kernels and all(ast.unparse(n.decorator_list[0]) == "triton.jit" for n in kernels)
        assert init_args(reference["Model"]) == init_args(solution["ModelNew"])
        plan = task.solution.plan
        shape = next(iter(task.params["shapes"].values()))
        assert f"({', '.join(map(str, shape))})" in plan
        formulas = [line.split(" (")[0] for line in math_lines(task.ops)]
        assert formulas and all(formula in plan for formula in formulas), plan
        launched = len([k for k in kernels if not k.name.startswith("_")])
        assert f"{launched} kernel" in plan or f"Kernels ({launched})" in plan, plan
        assert "Memory traffic" in plan
        styles.add("sections" if "\nMath:" in plan else "bullets" if plan.startswith("- ") else "prose")
    assert styles == {"prose", "sections", "bullets"}


def test_a_few_families_match_their_references_on_every_input_set_under_the_interpreter():
    tasks = [generate_task(name, seed=0, scale="cpu") for name in FAST_FAMILIES]
    results = run_direct(tasks)
    assert failures(results) == {}
    for task in tasks:
        per_set = results[task.task_id]
        assert set(per_set) == set(variants(task))
        shapes = {name: tuple(map(tuple, r["shapes"])) for name, r in per_set.items()}
        assert len(set(shapes.values())) == len(shapes), f"input sets must change shapes: {shapes}"
        for result in per_set.values():
            assert result["max_numel"] <= CPU_MAX_NUMEL and not result["degenerate"], (task.family, result)


def test_the_sandbox_accepts_a_teacher_solution_on_its_inputs_and_an_input_set():
    task = generate_task("gemm_epilogue", seed=1, scale="cpu")
    for reference in list(variants(task).values())[:2]:
        result = evaluate_local(reference, task.solution.code, OPTIONS, backend="interpreter")
        assert result.status.value == "ok", (result.status, result.error, result.violations)
        assert result.triton_launches > 0


def hard_coded(task) -> str:
    """The teacher's elementwise solution with the element count of the problem's own input baked in."""
    numel = 1
    for size in next(iter(task.params["shapes"].values())):
        numel *= size
    code, count = re.subn(r"n_elements = \w+\.numel\(\)", f"n_elements = {numel}", task.solution.code)
    assert count == 1
    return code


def test_a_kernel_that_hard_codes_the_shapes_passes_the_default_inputs_and_fails_the_input_sets():
    task = generate_task("silu", seed=3, scale="cpu")
    cheat = hard_coded(task)
    alone = evaluate_local(task.code, cheat, OPTIONS, backend="interpreter")
    augmented = evaluate_local(task.code, cheat, OPTIONS, backend="interpreter", input_sets=task.input_sets)
    assert alone.status.value == "ok", alone.error
    assert augmented.status.value == "incorrect" and not augmented.correct, augmented.error


@pytest.mark.slow
@pytest.mark.timeout(7200)
def test_every_family_passes_the_sandbox_on_its_inputs_and_every_input_set():
    tasks = [generate_task(name, seed=0, scale="cpu") for name in TEMPLATED]
    pairs = [(reference, task.solution.code) for task in tasks for reference in variants(task).values()]
    labels = [(task.family, name) for task in tasks for name in variants(task)]
    results = evaluate_many(pairs, OPTIONS, "interpreter", workers=2)
    bad = [(label, r.status.value, (r.error or "")[-300:], r.violations[:2])
           for label, r in zip(labels, results) if r.status.value != "ok"]
    assert bad == []


@pytest.mark.slow
@pytest.mark.timeout(3600)
def test_many_draws_of_every_family_are_correct_and_not_degenerate():
    tasks = [generate_task(name, seed, "cpu") for name in TEMPLATED
             for seed in range(10 if FAMILIES[name].composition else 3)]
    results = run_direct(tasks, timeout=3000)
    assert failures(results) == {}
    degenerate = [(key, name) for key, per_set in results.items() for name, r in per_set.items() if r["degenerate"]]
    assert degenerate == []
