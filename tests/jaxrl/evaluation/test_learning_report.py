"""The learning report: the comparison table (one row per model, the sandbox's own failures counted apart), the
SFT checkpoint and GRPO task sections, the paired comparisons and issue 21's results.json."""

from __future__ import annotations

import json

import pytest

from jaxrl.evaluation.learning_report import (
    comparison_table, family_table, filter_section, main, paired_table, sft_section,
)
from jaxrl.evaluation.stats import wilson


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


def _greedy_run(path, statuses, speedup=1.5):
    """An eval run's samples.jsonl: problem p<i> of the set answered with statuses[i]."""
    path.mkdir(parents=True)
    (path / "samples.jsonl").write_text("".join(
        json.dumps({"problem": f"{path.name[0]}{i}", "sample": 0, "status": s, "speedup": speedup}) + "\n"
        for i, s in enumerate(statuses)))
    return path


def test_results_json_has_issue_21_s_layout_with_means_over_seeds_and_the_seeds_beside_them(tmp_path):
    runs = {("sft", "A"): ["ok", "incorrect", "incorrect", "infra_error"],
            ("grpo_hrd/s0", "A"): ["ok", "ok", "incorrect", "incorrect"],
            ("grpo_hrd/s1", "A"): ["ok", "ok", "ok", "incorrect"],
            ("sft", "B"): ["incorrect", "incorrect"], ("grpo_hrd/s0", "B"): ["ok", "incorrect"],
            ("grpo_hrd/s1", "B"): ["ok", "ok"]}
    args = ["--out", str(tmp_path / "report")]
    for (label, eval_set), statuses in runs.items():
        run = _greedy_run(tmp_path / f"{eval_set}-{label.replace('/', '-')}", statuses)
        args.append(f"--result={label}:{eval_set}={run}")
    assert main(args) == 0
    results = json.loads((tmp_path / "report" / "results.json").read_text())
    assert list(results) == ["sets"] and list(results["sets"]) == ["A", "B"]
    sft = results["sets"]["A"]["sft"]
    assert sft == {"n": 4, "correct_t0": 0.25, "correct_t0_ci": list(wilson(1, 4)), "fast_1": 0.25, "infra_errors": 1}
    hrd = results["sets"]["A"]["grpo_hrd"]
    assert hrd["correct_t0"] == (0.5 + 0.75) / 2 and hrd["correct_t0_ci"] == list(wilson(5, 8))
    assert [s["correct_t0"] for s in results["sets"]["A"]["grpo_hrd_seeds"]] == [0.5, 0.75]
    assert results["sets"]["B"]["grpo_hrd"]["correct_t0"] == 0.75
    bad = [*args, f"--result=distilled:A={tmp_path / 'A-sft'}"]
    with pytest.raises(SystemExit, match="unknown model 'distilled'"):
        main(bad)


def test_the_paired_table_compares_models_problem_by_problem_with_seeds_averaged(tmp_path):
    greedy = {("sft", "A"): _greedy_run(tmp_path / "A-sft", ["incorrect"] * 4),
              ("grpo_hrd/s0", "A"): _greedy_run(tmp_path / "A-h0", ["ok", "ok", "incorrect", "incorrect"]),
              ("grpo_hrd/s1", "A"): _greedy_run(tmp_path / "A-h1", ["ok", "incorrect", "incorrect", "incorrect"]),
              ("sft", "B"): _greedy_run(tmp_path / "B-sft", ["ok", "incorrect"]),
              ("grpo_hrd/s0", "B"): _greedy_run(tmp_path / "B-h0", ["ok", "ok"])}
    table = paired_table(greedy)
    assert "| A | grpo_hrd - sft | 4 | +37.5 pts |" in table  # per problem: 1, 0.5, 0, 0 over the two seeds
    assert "| A+B | grpo_hrd - sft | 6 | +41.7 pts |" in table and "| 3 | 0 | 0.25 |" in table  # B: 0, 1
    assert "grpo_uniform" not in table  # no run of it: no row


def test_the_filter_section_gives_the_distribution_of_correct_samples(tmp_path):
    summary = {"samples_per_task": 2, "tasks": 3, "distribution": {"0": 1, "1": 2, "2": 0}, "kept": 2,
               "kept_correct": [1, 1], "infra_errors": 0}
    text = filter_section(summary)
    assert "GRPO trains on the 2 with 1 to 1 correct" in text and "| tasks | 1 | 2 | 0 |" in text
