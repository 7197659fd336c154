"""Splits hold out whole families and recipes (never only shapes), deterministically, and fairly."""

from __future__ import annotations

import pytest

from jaxrl.data.engine import PARTS, SplitPlan, generate_split, generate_tasks, split_tasks
from jaxrl.data.engine.families import FAMILIES
from jaxrl.data.engine.splits import DEFAULT_HELD_OUT_FAMILIES


def test_held_out_families_and_operators_never_appear_in_training():
    plan = SplitPlan()
    held_ops = plan.reserved_ops("held_out")
    assert {"mish", "selu", "hardswish", "logsumexp", "cummax", "huber_loss"} <= held_ops
    train = generate_split(plan, "train", seed=0, count=200, scale="cpu")
    assert not {t.family for t in train} & set(plan.held_out_families + plan.validation_families)
    assert all(not set(t.ops) & (held_ops | plan.reserved_ops("validation")) for t in train)
    assert all(plan.part_of_task(t) == "train" for t in train)
    held = generate_split(plan, "held_out", seed=0, count=60, scale="cpu")
    assert {t.family for t in held} >= set(DEFAULT_HELD_OUT_FAMILIES)
    assert all(plan.part_of_task(t) == "held_out" for t in held)


def test_held_out_operators_are_made_of_primitives_training_sees():
    plan = SplitPlan()
    train_ops = {op for name in plan.families("train") for op in FAMILIES[name].ops if not FAMILIES[name].composition}
    assert {"tanh", "softplus", "elu", "hardsigmoid", "exp", "log", "max", "sum", "cumsum", "mse_loss", "matmul"} \
        <= train_ops
    for recipe in plan.held_out_recipes:
        assert set(recipe) <= train_ops, recipe


def test_every_single_op_family_is_in_exactly_one_part_and_recipes_split_by_op_sequence():
    plan = SplitPlan(seed=3)
    singles = [n for n, f in FAMILIES.items() if not f.composition]
    parts = {part: set(plan.families(part)) for part in PARTS}
    for name in singles:
        assert sum(name in parts[p] for p in PARTS) == 1
    chain = FAMILIES["elementwise_chain"]
    counts = {part: len(plan.recipes(part, "elementwise_chain")) for part in PARTS}
    assert sum(counts.values()) == len(chain.recipes())
    assert counts["held_out"] > 0.05 * len(chain.recipes()) and counts["validation"] > 0.05 * len(chain.recipes())
    # recipes with the same operator sequence go together, whichever family draws them
    assert plan.part_of("gemm_epilogue", ("linear_nobias", "add_bias", "relu")) == plan.part_of_ops(
        ("matmul", "add", "relu")) == plan.part_of("matmul_epilogue", ("matmul", "add_scalar", "relu"))
    assert plan.part_of("gemm_epilogue", ("linear", "gelu")) == "held_out"  # listed in DEFAULT_HELD_OUT_RECIPES


def test_splits_are_deterministic_and_follow_the_seed():
    a, b, c = SplitPlan(seed=1), SplitPlan(seed=1), SplitPlan(seed=2)
    recipes = FAMILIES["reduce_chain"].recipes()
    assign = lambda plan: [plan.part_of("reduce_chain", r) for r in recipes]  # noqa: E731
    assert assign(a) == assign(b) != assign(c)
    assert a.families("held_out") == b.families("held_out")


def test_tasks_generated_without_a_split_can_be_sorted_into_parts():
    plan = SplitPlan()
    tasks = generate_tasks(seed=0, count=2 * len(FAMILIES), scale="cpu")
    parts = split_tasks(tasks, plan)
    assert sum(map(len, parts.values())) == len(tasks)
    assert {t.family for t in parts["held_out"]} >= set(plan.held_out_families)


def test_bad_plans_are_rejected():
    with pytest.raises(ValueError, match="unknown family"):
        SplitPlan(held_out_families=("nope",))
    with pytest.raises(ValueError, match="both held out and in validation"):
        SplitPlan(held_out_families=("relu",), validation_families=("relu",))
    with pytest.raises(ValueError, match="composition family"):
        SplitPlan(held_out_families=("gemm_epilogue",))
    with pytest.raises(ValueError, match="fractions"):
        SplitPlan(held_out_fraction=0.6, validation_fraction=0.5)
    with pytest.raises(ValueError, match="unknown split part"):
        SplitPlan().families("test")


def test_rl_recipes_are_disjoint_from_the_sft_recipes_and_made_of_trained_operators():
    """GRPO's tasks (split rl) come from composition recipes no SFT pair uses, every operator of which the
    training split teaches: new to the policy as tasks, not as operators."""
    from jaxrl.data.engine.scope import trained_ops

    plan = SplitPlan()
    taught = trained_ops(plan)
    rl_recipes = 0
    for name, family in FAMILIES.items():
        if not family.composition:
            assert plan.part_of(name) != "rl"
            continue
        rl, train = set(plan.recipes("rl", name)), set(plan.recipes("train", name))
        assert not rl & train
        assert all(set(family.recipe_ops(r)) <= taught for r in rl)
        rl_recipes += len(rl)
    assert rl_recipes >= 50
