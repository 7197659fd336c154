"""The learning report's comparison table: one row per model, the sandbox's own failures counted apart."""

from __future__ import annotations

import json

from jaxrl.evaluation.learning_report import comparison_table, family_table, sft_section


def _eval_run(path, statuses, infra_errors):
    path.mkdir()
    correct = statuses.count("ok") / len(statuses)
    rates = {"valid": 1.0, "compiled": 1.0, "correct": correct, "fast_1": 0.0, "fast_2": 0.0}
    group = {"name": "all", "problems": len(statuses), "samples": len(statuses), "infra_errors": infra_errors,
             "rates": {"1": rates}, "mean_speedup": None}
    (path / "metrics.json").write_text(json.dumps({"ks": [1], "groups": [group]}))
    (path / "samples.jsonl").write_text("".join(json.dumps({"status": s, "family": "relu"}) + "\n" for s in statuses))
    return path


def test_the_table_counts_infra_errors_and_cheats_per_model(tmp_path):
    sft = _eval_run(tmp_path / "sft", ["ok", "incorrect", "cheat", "infra_error"], infra_errors=1)
    hrd = _eval_run(tmp_path / "hrd", ["ok", "ok", "incorrect", "incorrect"], infra_errors=0)
    table = comparison_table({"sft": {"heldout": sft}, "hrd": {"heldout": hrd}})
    assert "| infra errors |" in table.splitlines()[2]
    assert "| sft | 4 | 4 | 100.0% | 100.0% | 25.0% | 0.0% | 0.0% | - | 25.0% | 1 |" in table
    assert "| hrd | 4 | 4 | 100.0% | 100.0% | 50.0% | 0.0% | 0.0% | - | 0.0% | 0 |" in table
    assert "| relu | 25.0% | 50.0% |" in family_table({"sft": sft, "hrd": hrd})


def _grpo_run(path, first_step):
    path.mkdir()
    records = [{"step": 1, **first_step}, {"step": 2, "train/entropy": 0.1, "train/updated": 1.0}]
    (path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def test_the_sft_section_says_which_checkpoint_was_chosen_and_its_entropy_from_grpo_s_first_step(tmp_path):
    selection = {"criterion": "greedy correct on the val split", "chosen": "hf-step-2",
                 "candidates": [{"policy": "hf-step-2", "correct": 3, "tasks": 4, "infra_errors": 0},
                                {"policy": "hf", "correct": 1, "tasks": 4, "infra_errors": 1}]}
    grpo = {"grpo_hrd-s0": _grpo_run(tmp_path / "a", {"train/entropy": 0.4567, "train/updated": 1.0}),
            "grpo_uniform-s0": _grpo_run(tmp_path / "b", {"train/entropy": 0.0, "train/updated": 0.0})}
    text = sft_section(selection, grpo)
    assert "Chosen: `hf-step-2`, by greedy correct on the val split." in text
    assert "| hf-step-2 | 3 | 4 | 0 |" in text and "| hf | 1 | 4 | 1 |" in text
    assert "grpo_hrd-s0 0.457, grpo_uniform-s0 -." in text  # no update at the first step: no measurement
