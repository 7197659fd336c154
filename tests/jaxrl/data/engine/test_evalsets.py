"""Evaluation sets A, B and C: their sizes, what each one holds, and that they rebuild to the recorded digests."""

from __future__ import annotations

import json
import types

import pytest
import torch

from jaxrl.data.engine.evalsets import LOCK, SPECS, UNSEEN_OPS, build_set, check_files, digest, eval_row
from jaxrl.data.engine.families import FAMILIES
from jaxrl.data.engine.scope import trained_ops
from jaxrl.data.engine.signature import op_signature
from jaxrl.data.engine.splits import SplitPlan


@pytest.fixture(scope="module")
def sets():
    return {name: build_set(name) for name in SPECS}


def test_sets_have_the_sizes_the_issue_asks_for(sets):
    assert len(sets["A"]) >= 300 and len(sets["B"]) >= 100 and len(sets["C"]) == len(sets["B"])


def test_sets_rebuild_to_the_recorded_digests(sets):
    lock = json.loads(LOCK.read_text())
    for name, tasks in sets.items():
        assert lock[name]["tasks"] == len(tasks) and lock[name]["sha256"] == digest(tasks), name


def test_written_files_are_checked_against_the_lock(sets, tmp_path):
    for name, tasks in sets.items():
        (tmp_path / f"{name}.jsonl").write_text("".join(json.dumps(eval_row(t, name)) + "\n" for t in tasks))
    check_files(tmp_path)
    rows = (tmp_path / "B.jsonl").read_text().splitlines()
    (tmp_path / "B.jsonl").write_text("\n".join(rows[1:]) + "\n")
    with pytest.raises(ValueError, match="evaluation set B: .* does not match the digest"):
        check_files(tmp_path)
    (tmp_path / "C.jsonl").unlink()
    with pytest.raises(ValueError, match="evaluation set C: no "):
        check_files(tmp_path, ("C",))


def test_set_a_is_new_compositions_of_trained_operators(sets):
    plan, taught = SplitPlan(), trained_ops(SplitPlan())
    recipes = set()
    for task in sets["A"]:
        recipe = tuple(task.params["recipe"])
        assert plan.part_of(task.family, recipe) == "held_out" and set(task.ops) <= taught
        recipes.add(recipe)
    assert len(recipes) >= 30
    train_recipes = {r for name, f in FAMILIES.items() if f.composition for r in plan.recipes("train", name)}
    assert not recipes & train_recipes


def test_b_writes_the_math_and_c_names_the_operator_for_the_same_programs(sets):
    assert {t.family for t in sets["B"]} == set(UNSEEN_OPS) and not set(UNSEEN_OPS) & trained_ops(SplitPlan())
    for b, c in zip(sets["B"], sets["C"]):
        assert b.ops == c.ops and b.input_sets == c.input_sets and b.dtype == c.dtype
        assert b.family not in b.code.lower().replace("_", ""), b.code  # spelled out, not named
        assert b.family in c.code.lower().replace("_", ""), c.code
        assert b.family not in op_signature(b.code)


def _model(code: str):
    module = types.ModuleType("reference")
    exec(compile(code, "reference.py", "exec"), module.__dict__)  # noqa: S102 - the engine's own references
    return module


def test_b_and_c_references_compute_the_same_outputs(sets):
    for b, c in list(zip(sets["B"], sets["C"]))[:27]:
        mb, mc = _model(b.code), _model(c.code)
        torch.manual_seed(0)
        inputs = mb.get_inputs()
        torch.manual_seed(1)
        model_b = mb.Model(*mb.get_init_inputs())
        torch.manual_seed(1)
        model_c = mc.Model(*mc.get_init_inputs())
        with torch.no_grad():
            out_b, out_c = model_b(*inputs), model_c(*inputs)
        tol = 1e-5 if b.dtype == "float32" else 2e-2
        torch.testing.assert_close(out_b.float(), out_c.float(), rtol=tol, atol=tol, msg=b.task_id)
