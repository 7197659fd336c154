"""In-scope benchmark problems: every operator is one the training split teaches."""

from __future__ import annotations

from jaxrl.data import load_problems
from jaxrl.data.engine.scope import in_scope, trained_ops
from jaxrl.data.engine.splits import SplitPlan


def test_held_out_and_validation_operators_are_not_taught():
    taught = trained_ops()
    plan = SplitPlan()
    assert {"relu", "softmax", "matmul", "layer_norm", "cumsum"} <= taught
    assert not taught & plan.reserved_ops("held_out")
    assert not taught & plan.reserved_ops("validation")


def test_level_one_in_scope_problems_use_only_taught_operators(kernelbench_path):
    problems = load_problems(kernelbench_path, levels=[1])
    scoped = {p.key: p for p in in_scope(problems)}
    assert "L1/19" in scoped and scoped["L1/19"].ops == ("relu",)  # ReLU
    assert "L1/27" not in scoped  # SELU: a held-out family's operator
    assert "L1/90" not in scoped  # cumprod: a validation family's operator
    assert "L1/50" not in scoped  # a convolution: no family teaches it
    taught = trained_ops()
    assert all(set(p.ops) <= taught for p in scoped.values())
    assert 20 <= len(scoped) <= 60
