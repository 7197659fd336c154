"""The learning recipe's runner: which commands a step makes, in what order, and how they are run."""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
from pathlib import Path

import pytest

from jaxrl.config import load_config
from jaxrl.data.engine import evalsets
from jaxrl.recipes.learning import (
    ARMS, CONFIGS, DEFAULT_ORDER, EVAL_SETS, FILTER_CONFIG, GREEDY, REPORT_K, RUN_NAMES, SAMPLED, SELECT_CONFIG, SFT_CONFIG, Command,
    Plan, eval_run_name, filter_tasks, main, run_commands, select_checkpoint, sft_policy, stage_commands,
    step_commands,
)

ADDRESS = "127.0.0.1:1"


@pytest.fixture(scope="module")
def built_sets(tmp_path_factory):
    """Sets A, B and C as the evalsets stage writes them (built once for the module)."""
    out = tmp_path_factory.mktemp("evalsets")
    assert evalsets.main(["--out", str(out), "--check"]) == 0
    return out


@pytest.fixture
def plan(tmp_path, built_sets) -> Plan:
    """A plan whose shared sandbox is recorded as live (this process), so no server is started."""
    (tmp_path / "learn-sandbox.json").write_text(json.dumps({"pid": os.getpid(), "address": ADDRESS}))
    shutil.copytree(built_sets, tmp_path / "evalsets")
    return Plan(tmp_path)


def _names(commands: list[Command]) -> list[str]:
    return [c.label for c in commands]


def _sft_run(plan: Plan, candidates: tuple[str, ...] = ("hf-step-10", "hf-step-2", "hf")) -> None:
    for name in candidates:
        (plan.sft_dir / name).mkdir(parents=True)
        (plan.sft_dir / name / "config.json").write_text("{}")


def _select(plan: Plan, correct: dict[str, int], tasks: int = 4) -> Path:
    """Finished val-split evaluations of the SFT candidates (`correct[name]` of `tasks` right), then the choice."""
    for name, n in correct.items():
        run = plan.run_dir(f"issue21-select-{name}")
        run.mkdir()
        (run / "samples.jsonl").write_text("".join(
            json.dumps({"problem": f"val-{i}", "sample": 0, "status": "ok" if i < n else "incorrect"}) + "\n"
            for i in range(tasks)))
        (run / "metrics.json").write_text("{}")
    return select_checkpoint(plan)


def test_an_eval_stage_with_a_decoding_makes_only_those_evaluations(plan):
    _sft_run(plan, ("hf",))
    _select(plan, {"hf": 1})
    greedy = stage_commands("eval-sft/greedy", plan)
    assert _names(greedy) == [f"eval {eval_run_name('sft', s, GREEDY)}" for s in "ABCDE"]
    assert all("sampling.temperature=0.0" in c.argv and f"sandbox.targets=[{ADDRESS}]" in c.argv for c in greedy)
    sampled = stage_commands("eval-sft/sampled", plan)
    assert _names(sampled) == [f"eval {eval_run_name('sft', s, SAMPLED)}" for s in "ABCD"]  # E: greedy only
    both = stage_commands("eval-sft", plan)
    assert _names(both) == _names(greedy) + _names(sampled)  # greedy first: the targets are at temperature 0


def test_sets_a_b_c_are_evaluated_from_the_built_files_once_they_match_the_lock(plan):
    untrained = stage_commands("eval-base/greedy", plan)
    for command, name in zip(untrained, "ABC"):
        assert f"eval.dataset={plan.output_root / 'evalsets' / (name + '.jsonl')}" in command.argv
        assert "model.source=smollm2-135m" in command.argv
    assert not any(a.startswith("eval.dataset=") for a in untrained[3].argv)  # D: the config's KernelBench problems
    with (plan.output_root / "evalsets" / "B.jsonl").open("a") as f:
        f.write(json.dumps({"task_id": "extra"}) + "\n")
    with pytest.raises(ValueError, match="evaluation set B: .* does not match the digest"):
        stage_commands("eval-base/greedy", plan)
    assert _names(stage_commands("evalsets", plan)) == ["data evalsets"]  # rebuilt by the evalsets stage
    shutil.rmtree(plan.output_root / "evalsets")
    with pytest.raises(ValueError, match="evaluation set A: no "):
        stage_commands("eval-base/greedy", plan)


def _filter_run(plan: Plan, correct: dict[str, int], samples: int = 8) -> None:
    """The data build's rl_tasks.jsonl and a finished filter evaluation with `correct[task]` of `samples` right."""
    plan.data_dir.mkdir(parents=True, exist_ok=True)
    rows = [{"task_id": task, "split": "rl", "code": "..."} for task in [*correct, "never-sampled"]]
    (plan.data_dir / "rl_tasks.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    run = plan.run_dir("issue21-filter-eval")
    run.mkdir()
    (run / "samples.jsonl").write_text("".join(
        json.dumps({"problem": task, "sample": i, "status": "ok" if i < n else "incorrect"}) + "\n"
        for task, n in correct.items() for i in range(samples)))
    (run / "metrics.json").write_text("{}")


def test_sft_checkpoints_are_chosen_on_the_val_split_only(plan):
    with pytest.raises(ValueError, match="run the sft stage first"):
        stage_commands("select", plan)
    _sft_run(plan)
    commands = stage_commands("select", plan)
    assert _names(commands) == [f"eval issue21-select-{n}" for n in ("hf-step-2", "hf-step-10", "hf")]
    for command, name in zip(commands, ("hf-step-2", "hf-step-10", "hf")):
        assert str(CONFIGS / SELECT_CONFIG) in command.argv and f"model.source={plan.sft_dir / name}" in command.argv
        assert f"eval.dataset={plan.data_dir / 'rl_tasks.jsonl'}" in command.argv
    config = load_config(CONFIGS / SELECT_CONFIG)
    assert (config.eval.split, config.sampling.temperature, config.sampling.num_samples) == ("val", 0.0, 1)
    assert load_config(CONFIGS / SFT_CONFIG).sft.export_every > 0
    with pytest.raises(ValueError, match="run the select stage after sft"):
        stage_commands("eval-sft/greedy", plan)


def test_the_most_correct_candidate_is_chosen_and_ties_go_to_the_later_step(plan):
    _sft_run(plan)
    assert _select(plan, {"hf-step-2": 1, "hf-step-10": 3, "hf": 3}) == plan.sft_dir / "hf"
    assert stage_commands("select", plan) == []  # evaluated once
    selection = json.loads(plan.selection.read_text())
    assert [(r["policy"], r["correct"], r["tasks"]) for r in selection["candidates"]] == [
        ("hf-step-2", 1, 4), ("hf-step-10", 3, 4), ("hf", 3, 4)]
    for name, n in (("hf-step-10", 4), ("hf-step-2", 4)):
        (plan.run_dir(f"issue21-select-{name}") / "samples.jsonl").write_text("".join(
            json.dumps({"problem": f"val-{i}", "sample": 0, "status": "ok" if i < n else "incorrect"}) + "\n"
            for i in range(4)))
        assert select_checkpoint(plan) == plan.sft_dir / "hf-step-10"
    assert sft_policy(plan) == plan.sft_dir / "hf-step-10"
    assert all(f"model.source={plan.sft_dir / 'hf-step-10'}" in c.argv for c in stage_commands("eval-sft", plan))


def test_the_filter_samples_the_sft_policy_as_grpo_samples_on_the_rl_split(plan):
    _sft_run(plan)
    _select(plan, {"hf-step-2": 2, "hf-step-10": 0, "hf": 1})
    (command,) = stage_commands("filter", plan)
    assert command.label == "eval issue21-filter-eval"
    assert f"eval.dataset={plan.data_dir / 'rl_tasks.jsonl'}" in command.argv
    assert f"model.source={plan.sft_dir / 'hf-step-2'}" in command.argv
    grpo, sampled = load_config(CONFIGS / ARMS["grpo_hrd"]), load_config(CONFIGS / FILTER_CONFIG)
    assert sampled.sampling.num_samples == grpo.grpo.group_size == 8 and sampled.eval.split == grpo.grpo.split == "rl"
    for key in ("temperature", "top_p", "top_k", "max_new_tokens", "max_prompt_tokens"):
        assert getattr(sampled.sampling, key) == getattr(grpo.sampling, key), key
    assert sampled.sandbox.trials == grpo.sandbox.trials


def test_grpo_trains_on_the_tasks_with_1_to_7_of_8_correct_and_the_distribution_is_written(plan):
    _sft_run(plan, ("hf",))
    _select(plan, {"hf": 1})
    with pytest.raises(ValueError, match="run the filter stage first"):
        stage_commands("grpo", plan)
    _filter_run(plan, {"none": 0, "one": 1, "some": 5, "seven": 7, "all": 8})
    tasks = filter_tasks(plan)
    assert [json.loads(line)["task_id"] for line in tasks.read_text().splitlines()] == ["one", "some", "seven"]
    summary = json.loads((plan.run_dir("issue21-filter") / "pass_at_k.json").read_text())
    assert summary["distribution"] == {"0": 1, "1": 1, "2": 0, "3": 0, "4": 0, "5": 1, "6": 0, "7": 1, "8": 1}
    assert (summary["tasks"], summary["kept"], summary["kept_correct"]) == (5, 3, [1, 7])
    assert stage_commands("filter", plan) == []  # measured once
    assert all(f"grpo.dataset={tasks}" in c.argv for c in stage_commands("grpo", plan))


def test_a_filter_that_keeps_no_task_stops_the_recipe_before_grpo(plan):
    _sft_run(plan, ("hf",))
    _select(plan, {"hf": 1})
    _filter_run(plan, {"none": 0, "all": 8})
    with pytest.raises(RuntimeError, match="no rl task had 1 to 7 of 8 samples correct"):
        filter_tasks(plan)
    with pytest.raises(ValueError, match="no GRPO tasks"):
        stage_commands("grpo", plan)


def test_finished_evaluations_and_trained_models_are_not_run_again(plan):
    assert _names(stage_commands("evalsets", plan)) == []  # built and matching the lock
    done = plan.run_dir(eval_run_name("grpo_hrd-s1", "A", GREEDY))
    done.mkdir()
    (done / "metrics.json").write_text("{}")
    assert f"eval {done.name}" not in _names(stage_commands("eval-grpo/greedy", plan))
    _sft_run(plan, ("hf",))
    _select(plan, {"hf": 1})
    _filter_run(plan, {"one": 1})
    filter_tasks(plan)
    hf = plan.run_dir("issue21-grpo-hrd-s0") / "hf"
    hf.mkdir(parents=True)
    (hf / "config.json").write_text("{}")
    assert _names(stage_commands("grpo", plan)) == ["grpo issue21-grpo-uniform-s0", "grpo issue21-grpo-hrd-s1",
                                                    "grpo issue21-grpo-uniform-s1"]


def test_each_arm_runs_once_per_seed_from_the_same_sft_policy_and_tasks(plan):
    _sft_run(plan)
    _select(plan, {"hf-step-2": 2, "hf-step-10": 0, "hf": 1})
    _filter_run(plan, {"one": 1})
    filter_tasks(plan)
    commands = stage_commands("grpo", plan)
    assert _names(commands) == ["grpo issue21-grpo-hrd-s0", "grpo issue21-grpo-uniform-s0",
                                "grpo issue21-grpo-hrd-s1", "grpo issue21-grpo-uniform-s1"]
    for command, (arm, seed) in zip(commands, [("hrd", 0), ("uniform", 0), ("hrd", 1), ("uniform", 1)]):
        assert str(CONFIGS / f"issue21_grpo_{arm}.yaml") in command.argv
        assert {f"grpo.seed={seed}", f"sampling.seed={seed}", f"grpo.dataset={plan.grpo_tasks}",
                f"model.source={plan.sft_dir / 'hf-step-2'}", f"model.tokenizer={plan.sft_dir / 'hf-step-2'}"
                } <= set(command.argv)
    evals = _names(stage_commands("eval-grpo/greedy", plan))
    assert len(evals) == 4 * 5 and f"eval {eval_run_name('grpo_uniform-s1', 'E', GREEDY)}" in evals
    assert _names(stage_commands("grpo", Plan(plan.output_root, seeds=(3,))))[0] == "grpo issue21-grpo-hrd-s3"


def test_the_run_names_are_the_configs_own():
    for config, name in RUN_NAMES.items():
        assert load_config(CONFIGS / config).run.name == name


def test_the_grpo_arms_are_hrd_alpha_0_1_and_uniform_beta_0_3_on_the_rl_split():
    hrd, uniform = (load_config(CONFIGS / ARMS[arm]).grpo for arm in ("grpo_hrd", "grpo_uniform"))
    assert (hrd.reward_mode, hrd.alpha, uniform.reward_mode, uniform.uniform_beta) == ("hrd", 0.1, "uniform", 0.3)
    assert hrd.split == uniform.split == "rl" and hrd.dynamic_sampling


def test_every_evaluation_generates_as_many_tokens_as_grpo_trains_with():
    budget = load_config(CONFIGS / ARMS["grpo_hrd"]).sampling.max_new_tokens
    assert {load_config(CONFIGS / s.config).sampling.max_new_tokens for s in EVAL_SETS.values()} == {budget}


def test_bad_stages_are_refused(plan):
    with pytest.raises(ValueError, match="only eval stages take"):
        stage_commands("sft/greedy", plan)
    with pytest.raises(ValueError, match="unknown stage"):
        stage_commands("distill", plan)
    for stages in ("eval-base+distill", "eval-sft/gredy", "report/greedy", "sft/sampled"):
        with pytest.raises(SystemExit):  # refused before any command runs, not in the middle of a long run
            main(["--output-root", str(plan.output_root), "--stages", stages])
    for bad in (["--memory", "sft=1.5"], ["--seeds", "0,one"], ["--max-training", "0"]):
        with pytest.raises(SystemExit):
            main(["--output-root", str(plan.output_root), *bad])


def test_training_starts_before_the_evaluations_of_its_step(plan):
    labels = [c.label for c in step_commands("eval-base+sft", plan)]
    assert labels[0] == "sft issue21-sft" and all(label.startswith("eval ") for label in labels[1:])


def test_commands_run_at_most_max_parallel_at_once_and_failures_do_not_stop_the_others(tmp_path):
    log = tmp_path / "log"
    script = ("import sys, time; open(sys.argv[1], 'a').write(f'start {time.time()}\\n'); time.sleep(0.6); "
              "open(sys.argv[1], 'a').write(f'end {time.time()}\\n'); sys.exit(int(sys.argv[2]))")
    commands = [Command((sys.executable, "-c", script, str(log), str(code)), "eval", f"c{i}")
                for i, code in enumerate([0, 3, 0, 0])]
    started = time.monotonic()
    failed = run_commands(commands, Plan(tmp_path, max_parallel=2))
    assert failed == ["eval c1"]
    events = sorted((float(t), kind) for kind, t in (line.split() for line in log.read_text().splitlines()))
    assert len(events) == 8
    running = peak = 0
    for _, kind in events:
        running += 1 if kind == "start" else -1
        peak = max(peak, running)
    assert peak == 2
    assert time.monotonic() - started >= 1.2  # two rounds of two


def test_at_most_max_training_commands_train_at_once_and_evaluations_do_not_wait_behind_them(tmp_path, capsys):
    log = tmp_path / "log"
    script = ("import sys, time; open(sys.argv[1], 'a').write(f'start {sys.argv[2]} {time.time()}\\n'); "
              "time.sleep(0.6); open(sys.argv[1], 'a').write(f'end {sys.argv[2]} {time.time()}\\n')")
    commands = [Command((sys.executable, "-c", script, str(log), kind), kind, f"c{i}")
                for i, kind in enumerate(["grpo", "grpo", "grpo", "eval"])]
    assert run_commands(commands, Plan(tmp_path, max_parallel=3, max_training=2)) == []
    events = sorted((float(t), kind, what) for kind, what, t in (line.split() for line in log.read_text().splitlines()))
    running = {"grpo": 0, "eval": 0}
    peak = dict(running)
    for _, kind, what in events:
        running[what] += 1 if kind == "start" else -1
        peak[what] = max(peak[what], running[what])
    assert peak == {"grpo": 2, "eval": 1}
    started = [line.split()[-1] for line in capsys.readouterr().out.splitlines() if line.startswith("learning: start")]
    assert started == ["c0", "c1", "c3", "c2"]  # the evaluation went ahead of the third training run


def test_the_report_k_is_the_sampled_evaluations_samples_per_task():
    config = load_config(CONFIGS / EVAL_SETS["A"].config)
    assert config.sampling.num_samples == REPORT_K and REPORT_K in config.eval.k


def test_the_device_script_runs_the_default_order_but_the_carried_data_build():
    script = (CONFIGS.parents[1] / "scripts" / "device_learning.sh").read_text()
    stages = "".join(line.split("=", 1)[1].strip('"') for line in script.splitlines()
                     if line.startswith(("STAGES=", "STAGES+=")))
    assert stages == DEFAULT_ORDER.removeprefix("data,")
