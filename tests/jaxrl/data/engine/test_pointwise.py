"""The shared operator table: every expression spelling computes what the operator's name computes, the
evaluation-only operators' Triton statements are right, and every operator's math is written out."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F  # noqa: N812 - the spelling the table uses

from jaxrl.data.engine.pointwise import EVAL_ONLY_OPS, POINTWISE
from jaxrl.data.engine.families import FAMILIES

PARAMS = {"negative_slope": 0.07, "alpha": 0.8, "lambd": 0.45, "min_val": -0.6, "max_val": 0.9}


def _eval(template: str, x: torch.Tensor) -> torch.Tensor:
    values = {k: repr(v) for k, v in PARAMS.items()}
    return eval(template.format(x="x", **values), {"torch": torch, "F": F, "x": x})  # noqa: S307 - our own table


@pytest.mark.parametrize("name", sorted(op for op, entry in POINTWISE.items() if entry.expressions))
def test_every_expression_computes_the_named_operator(name):
    op = POINTWISE[name]
    x = torch.linspace(-25.0, 25.0, 4001, dtype=torch.float64)
    if op.positive_input:
        x = x.abs() + 0.01
    expected = _eval(op.functions[0], x)
    for expression in op.expressions:
        torch.testing.assert_close(_eval(expression, x), expected, rtol=1e-6, atol=1e-7, msg=expression)


def test_every_operator_states_its_math_and_safe_form():
    for name, op in POINTWISE.items():
        assert op.math and op.safe, name


def test_evaluation_only_operators_belong_to_no_family():
    used = {op for family in FAMILIES.values() for op in family.ops}
    assert set(EVAL_ONLY_OPS) <= set(POINTWISE) and not used & set(EVAL_ONLY_OPS)
    assert all(POINTWISE[op].expressions for op in EVAL_ONLY_OPS)
