"""The teacher's strategies are genuinely different solutions of the same task, each one correct.

For one task per kind of kernel, every strategy axis (elementwise layout flat / tiled2d / grid_stride,
matmul tile order plain / grouped, fused / separate kernels) gives different code and a different plan,
and every one of them matches the reference on every input set under the Triton interpreter.
"""

from __future__ import annotations

import dataclasses
import random

from engine_checks import failures, run_direct
from jaxrl.data.engine import generate_task
from jaxrl.data.engine.families import get_family
from jaxrl.data.engine.render import render_reference
from jaxrl.data.engine.teacher import write_solution
from jaxrl.data.engine.teacher.emitter import ELEMENTWISE_LAYOUTS, draw_strategy, scale_config

CPU = scale_config("cpu", "float32")
STRATEGIES = (
    [dataclasses.replace(CPU, elementwise_layout=layout, elementwise_block=256, elementwise_warps=2, reduce_block=b)
     for layout, b in zip(ELEMENTWISE_LAYOUTS, (128, 256, 1024))]
    + [dataclasses.replace(CPU, matmul_group_m=8, matmul_blocks=(16, 32, 32), matmul_warps=8),
       dataclasses.replace(CPU, fuse=False, elementwise_layout="tiled2d")]
)
FAMILIES = ("elementwise_chain", "gemm_epilogue", "reduce_chain", "norm_activation")


def _variants(family: str, seed: int):
    """The task, and one copy per strategy with that strategy's solution (same reference, same inputs)."""
    task = generate_task(family, seed, "cpu")
    rng = random.Random(f"engine:{seed}:{family}:0")
    program = get_family(family).draw(rng, "cpu").program
    reference = render_reference(program, rng)  # the generator's own draws: the same reference and input sets
    assert reference.code == task.code
    out = []
    for index, config in enumerate(STRATEGIES):
        solution = write_solution(program, reference, "cpu", random.Random(index), config)
        out.append(dataclasses.replace(task, task_id=f"{task.task_id}/s{index}", code=reference.code,
                                       solution=solution))
    return out


def test_strategies_write_different_code_and_plans_for_the_same_task():
    for family in FAMILIES:
        tasks = _variants(family, 1)
        codes = {t.solution.code for t in tasks}
        plans = {t.solution.plan for t in tasks}
        assert len(codes) >= 3 and len(plans) >= 3, family
    chain = _variants("elementwise_chain", 1)
    assert "for i in range(0, n_iters)" in chain[2].solution.code and "grid-stride" in chain[2].solution.plan
    assert "BLOCK_R" in chain[1].solution.code and "2-D tiles" in chain[1].solution.plan
    gemm = _variants("gemm_epilogue", 1)
    assert "GROUP_M" in gemm[3].solution.code and "groups of 8 tile rows" in gemm[3].solution.plan
    assert gemm[4].solution.code.count("@triton.jit") > gemm[0].solution.code.count("@triton.jit")
    assert "in their own kernel" in gemm[4].solution.plan


def test_drawn_strategies_cover_every_axis():
    drawn = [draw_strategy("cpu", "float32", random.Random(i)) for i in range(200)]
    assert {d.elementwise_layout for d in drawn} == set(ELEMENTWISE_LAYOUTS)
    assert {d.fuse for d in drawn} == {True, False} and {d.matmul_group_m for d in drawn} == {0, 8}
    assert len({d.elementwise_block for d in drawn}) == 4 and len({d.matmul_blocks for d in drawn}) == 4


def test_every_strategy_matches_the_reference_on_every_input_set_under_the_interpreter():
    tasks = [t for family in FAMILIES for t in _variants(family, 1)]
    assert failures(run_direct(tasks)) == {}
