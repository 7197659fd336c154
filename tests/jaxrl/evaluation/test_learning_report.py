"""The learning report's comparison table: one row per model, the sandbox's own failures counted apart."""

from __future__ import annotations

import json

from jaxrl.evaluation.learning_report import comparison_table, family_table


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
