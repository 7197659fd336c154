"""The learning recipe's runner: which commands a step makes, in what order, and how they are run."""

from __future__ import annotations

import json
import os
import sys
import time

import pytest

from jaxrl.recipes.learning import (
    CONFIGS, EVAL_SETS, GREEDY, RUN_NAMES, REPORT_K, SAMPLED, Command, Plan, eval_run_name, main, run_commands, stage_commands, step_commands,
)
from jaxrl.config import load_config

ADDRESS = "127.0.0.1:1"


@pytest.fixture
def plan(tmp_path) -> Plan:
    """A plan whose shared sandbox is recorded as live (this process), so no server is started."""
    (tmp_path / "learn-sandbox.json").write_text(json.dumps({"pid": os.getpid(), "address": ADDRESS}))
    return Plan(tmp_path)


def _names(commands: list[Command]) -> list[str]:
    return [c.label for c in commands]


def test_an_eval_stage_with_a_decoding_makes_only_those_evaluations(plan):
    greedy = stage_commands("eval-sft/greedy", plan)
    assert _names(greedy) == [f"eval {eval_run_name('sft', s, GREEDY)}" for s in EVAL_SETS]
    assert all("sampling.temperature=0.0" in c.argv and f"sandbox.targets=[{ADDRESS}]" in c.argv for c in greedy)
    sampled = stage_commands("eval-sft/sampled", plan)
    assert _names(sampled) == [f"eval {eval_run_name('sft', s, SAMPLED)}" for s in EVAL_SETS
                               if SAMPLED in EVAL_SETS[s].decodings]
    assert "kbl2" not in " ".join(_names(sampled))  # level 2 is evaluated greedy only
    both = stage_commands("eval-sft", plan)
    assert _names(both) == _names(greedy) + _names(sampled)  # greedy first: the targets are at temperature 0


def test_finished_evaluations_and_trained_models_are_not_run_again(plan):
    done = plan.run_dir(eval_run_name("hrd", "heldout", GREEDY))
    done.mkdir()
    (done / "metrics.json").write_text("{}")
    assert f"eval {done.name}" not in _names(stage_commands("eval-grpo/greedy", plan))
    hf = plan.run_dir("learn-grpo-hrd") / "hf"
    hf.mkdir(parents=True)
    (hf / "config.json").write_text("{}")
    assert _names(stage_commands("grpo", plan)) == ["grpo learn-grpo-uniform"]


def test_the_run_names_are_the_configs_own():
    for config, name in RUN_NAMES.items():
        assert load_config(CONFIGS / config).run.name == name


def test_bad_stages_are_refused(plan):
    with pytest.raises(ValueError, match="only eval stages take"):
        stage_commands("sft/greedy", plan)
    with pytest.raises(ValueError, match="unknown stage"):
        stage_commands("distill", plan)
    for stages in ("eval-base+distill", "eval-sft/gredy", "report/greedy", "sft/sampled"):
        with pytest.raises(SystemExit):  # refused before any command runs, not in the middle of a long run
            main(["--output-root", str(plan.output_root), "--stages", stages])
    with pytest.raises(SystemExit):
        main(["--output-root", str(plan.output_root), "--memory", "sft=1.5"])


def test_training_starts_before_the_evaluations_of_its_step(plan):
    labels = [c.label for c in step_commands("eval-base+sft", plan)]
    assert labels[0] == "sft learn-sft" and all(label.startswith("eval ") for label in labels[1:])


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


def test_the_report_k_is_the_sampled_evaluations_samples_per_task():
    config = load_config(CONFIGS / EVAL_SETS["heldout"].config)
    assert config.sampling.num_samples == REPORT_K and REPORT_K in config.eval.k
