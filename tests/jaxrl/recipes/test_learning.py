"""The learning demonstration's whole path, tiny, on the CPU: issue 21's data build and evaluation sets -> SFT ->
the checkpoint chosen on the val split -> the filter -> GRPO (HRD and uniform, two seeds each) -> evaluation ->
plots, with a random 2-layer model and the Triton interpreter sandbox.

It checks what the real run's conclusions rest on: the SFT loss falls, every GRPO sample has its rewards
recorded, the plots and the comparison are written, and a stage resumed after an interruption gives the same
metrics as one run straight through.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from jaxrl.recipes.learning import CONFIGS, Plan, run_stage, stop_sandbox

pytestmark = pytest.mark.slow

# The data build draws from four families whose first two shards hold train pairs, validation tasks (gelu_tanh and
# validation recipes) and rl-split tasks (reduce_chain and softmax_chain recipes), with or without a KernelBench
# copy to decontaminate against; data.rl_tasks=24 keeps every task of them. eval.per_family=1 evaluates one task
# of each family of set A (and of the rl split, for the filter). A random model solves nothing, so the filter keeps
# the tasks with 0 correct (min_correct=0) and GRPO samples without dynamic sampling, which would drop every group
# (both rules have their own tests).
TINY = (
    "model.tokenizer=smollm2-135m", "model.dtype=float32", "model.param_dtype=float32",
    "model.attention_impl=reference",
    "data.sft_pairs=8", "data.rl_tasks=24", "data.chunk_size=32", "data.validate_seeds=2",
    "data.families=[relu,gelu_tanh,reduce_chain,softmax_chain]",
    "sft.epochs=50", "sft.max_steps=6", "sft.batch_size=2", "sft.micro_batch_rows=1", "sft.max_seq_len=2048",
    "sft.logits_chunk=512", "sft.eval_fraction=0.0", "sft.eval_every=0", "sft.export_every=3",
    "optim.learning_rate=3.0e-03", "optim.decay=constant", "optim.warmup_ratio=0.0",
    "checkpoint.every=3", "checkpoint.async_save=false",
    "grpo.max_steps=2", "grpo.group_size=2", "grpo.tasks_per_step=2", "grpo.tasks_per_call=2",
    "grpo.micro_batch_rows=2", "grpo.row_multiple=128", "grpo.logits_chunk=0", "grpo.timed=false",
    "grpo.dynamic_sampling=false", "eval.per_family=1",
    "sampling.max_new_tokens=24", "sampling.max_prompt_tokens=2048", "sampling.batch_size=4",
    "sampling.num_samples=2", "eval.k=[1,2]", "sandbox.backend=interpreter", "sandbox.trials=1",
    "sandbox.timeout_s=120", "sandbox.max_concurrency=4",
)


@pytest.fixture(scope="module")
def learned(tmp_path_factory):
    root = tmp_path_factory.mktemp("learning")
    # Two commands at a time: on two cores the later ones of a step find the programs the first ones compiled in the
    # recipe's JAX cache (four at once all compile the same programs).
    plan = Plan(root, TINY, base_model="random:tiny_llama", eval_sets=("A",), sandbox_backend="interpreter",
                sandbox_workers=2, max_parallel=2, min_correct=0)
    try:
        for stage in ("data", "evalsets", "sft", "select", "filter", "grpo", "eval-sft/greedy+eval-grpo/greedy",
                      "report"):
            run_stage(stage, plan)
    finally:
        stop_sandbox(plan)
    return plan


def _metrics(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines() if line.strip()]


def test_the_sft_loss_falls(learned):
    losses = [r["train/loss"] for r in _metrics(learned.sft_dir) if "train/loss" in r]
    assert len(losses) == 6
    assert losses[-1] < 0.9 * losses[0]


def test_the_sft_policy_is_chosen_among_its_exports_on_the_val_split_and_every_later_stage_starts_from_it(learned):
    selection = json.loads(learned.selection.read_text())
    assert [r["policy"] for r in selection["candidates"]] == ["hf-step-3", "hf"]
    rows = [json.loads(line) for line in (learned.data_dir / "rl_tasks.jsonl").read_text().splitlines()]
    val = {r["task_id"] for r in rows if r["split"] == "val"}
    for candidate in selection["candidates"]:
        samples = (learned.run_dir(f"issue21-select-{candidate['policy']}") / "samples.jsonl").read_text()
        assert {json.loads(line)["problem"] for line in samples.splitlines()} <= val
        assert candidate["tasks"] > 0
    chosen = learned.sft_dir / selection["chosen"]
    for run in (learned.run_dir("issue21-filter-eval"), *map(learned.grpo_dir, learned.grpo_runs)):
        assert f"source: {chosen}\n" in (run / "config.yaml").read_text(), run
    assert f"Chosen: `{selection['chosen']}`" in (learned.output_root / "issue21-report" / "comparison.md").read_text()


def test_the_filter_measures_the_sft_policy_on_the_rl_split_and_grpo_trains_on_what_it_keeps(learned):
    rows = [json.loads(line) for line in (learned.data_dir / "rl_tasks.jsonl").read_text().splitlines()]
    summary = json.loads((learned.run_dir("issue21-filter") / "pass_at_k.json").read_text())
    assert summary["samples_per_task"] == 2 and sum(summary["distribution"].values()) == summary["tasks"] > 0
    assert set(summary["correct_per_task"]) <= {r["task_id"] for r in rows if r["split"] == "rl"}
    kept = {json.loads(line)["task_id"] for line in learned.grpo_tasks.read_text().splitlines()}
    assert len(kept) == summary["kept"] > 0
    for model in learned.grpo_runs:
        rollouts = (learned.grpo_dir(model) / "rollouts.jsonl").read_text().splitlines()
        assert {json.loads(line)["task"] for line in rollouts} <= kept


def test_every_grpo_sample_has_its_rewards_recorded(learned):
    tasks = min(2, len(learned.grpo_tasks.read_text().splitlines()))  # grpo.tasks_per_step, or as many as were kept
    assert list(learned.grpo_runs) == ["grpo_hrd-s0", "grpo_uniform-s0", "grpo_hrd-s1", "grpo_uniform-s1"]
    for model, (arm, seed) in learned.grpo_runs.items():
        run = learned.grpo_dir(model)
        records = [json.loads(line) for line in (run / "rollouts.jsonl").read_text().splitlines() if line.strip()]
        assert len(records) == 2 * tasks * 2  # steps x tasks x group
        for record in records:
            assert record["status"] and "r_correct" in record and "r_speedup" in record and "usable" in record, record
        config = (run / "config.yaml").read_text()
        assert f"reward_mode: {arm.removeprefix('grpo_')}" in config and f"  seed: {seed}\n" in config


def test_the_plots_the_comparison_and_results_json_are_written(learned):
    report = learned.output_root / "issue21-report"
    for name in ("sft_loss.png", "grpo_curves.png", "comparison.md"):
        assert (report / name).stat().st_size > 0, name
    comparison = (report / "comparison.md").read_text()
    assert "### A (temperature 0)" in comparison and "| A | grpo_hrd - sft |" in comparison
    assert "## GRPO's tasks" in comparison
    for model in ("sft", *learned.grpo_runs):
        assert f"| {model} |" in comparison
    entry = json.loads((report / "results.json").read_text())["sets"]["A"]
    assert set(entry) == {"sft", "grpo_hrd", "grpo_uniform", "grpo_hrd_seeds", "grpo_uniform_seeds"}
    assert set(entry["grpo_hrd"]) == {"n", "correct_t0", "correct_t0_ci", "fast_1", "infra_errors"}
    assert len(entry["grpo_hrd_seeds"]) == len(entry["grpo_uniform_seeds"]) == 2


def test_a_resumed_stage_gives_the_metrics_of_a_straight_run(learned, tmp_path):
    """SFT stopped after 3 steps (a checkpoint) and run again gives the losses of the 6-step run made at once."""
    data = learned.data_dir / "sft.jsonl"

    def sft(steps: int) -> list[float]:
        command = [sys.executable, "-m", "jaxrl.main", "sft", "--config", str(CONFIGS / "issue21_sft.yaml"),
                   f"run.output_root={tmp_path}", "run.name=resumed", f"sft.data={data}", *TINY,
                   "model.source=random:tiny_llama", f"sft.max_steps={steps}", "checkpoint.export_hf=false"]
        subprocess.run(command, check=True, env={**os.environ, "XLA_PYTHON_CLIENT_MEM_FRACTION": "0.5"},
                       stdout=subprocess.DEVNULL)
        return [r["train/loss"] for r in _metrics(tmp_path / "resumed") if "train/loss" in r]

    assert len(sft(3)) == 3
    straight = [r["train/loss"] for r in _metrics(learned.sft_dir) if "train/loss" in r]
    assert sft(6) == straight
