"""The recipe on a machine of several GPUs: each command sees one GPU, the limits hold per GPU, commands spread
over the GPUs, and the sandbox serves on the same ones."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from jaxrl.recipes import learning
from jaxrl.recipes.learning import Command, Plan, _next_command, main, run_commands


def _commands(*kinds: str) -> list[Command]:
    return [Command(("true",), kind, f"c{i}") for i, kind in enumerate(kinds)]


def test_commands_go_to_the_least_busy_gpu_and_the_limits_hold_on_each(tmp_path):
    plan = Plan(tmp_path, gpus=("0", "1"), max_parallel=2, max_training=1)
    grpo_a, grpo_b, grpo_c, evaluation = _commands("grpo", "grpo", "grpo", "eval")
    running: list[tuple[Command, str | None]] = []
    pending = [grpo_a, grpo_b, grpo_c, evaluation]
    placed = []
    while (chosen := _next_command(pending, running, plan)) is not None:
        pending.remove(chosen[0])
        running.append(chosen)
        placed.append((chosen[0].name, chosen[1]))
    # one training run a GPU; the evaluation goes ahead of the third one, on the first GPU with room
    assert placed == [("c0", "0"), ("c1", "1"), ("c3", "0")] and pending == [grpo_c]


def test_without_gpus_every_command_shares_the_one_device(tmp_path):
    plan = Plan(tmp_path, max_parallel=3, max_training=2)
    running = [(c, None) for c in _commands("grpo", "grpo")]
    assert _next_command(_commands("grpo"), running, plan) is None
    command, gpu = _next_command(_commands("eval"), running, plan)
    assert command.kind == "eval" and gpu is None


def test_each_command_sees_only_its_gpu(tmp_path):
    log = tmp_path / "log"
    script = ("import os, sys, time; open(sys.argv[1], 'a').write(os.environ['CUDA_VISIBLE_DEVICES'] + '\\n'); "
              "time.sleep(0.3)")
    commands = [Command((sys.executable, "-c", script, str(log)), "eval", f"c{i}") for i in range(4)]
    assert run_commands(commands, Plan(tmp_path, gpus=("GPU-a", "GPU-b"), max_parallel=1)) == []
    assert sorted(log.read_text().split()) == ["GPU-a", "GPU-a", "GPU-b", "GPU-b"]


def test_the_sandbox_serves_on_the_recipe_s_gpus(tmp_path, monkeypatch):
    seen = {}

    class _Server:
        pid = 12345

        def __init__(self, argv, env=None, **_):
            seen["env"] = env
            ready = Path(argv[argv.index("--ready-file") + 1])
            ready.write_text(json.dumps({"address": "127.0.0.1:9"}))

        def poll(self):
            return None

    monkeypatch.setattr(learning.subprocess, "Popen", _Server)
    assert learning.sandbox_address(Plan(tmp_path, gpus=("2", "3"))) == "127.0.0.1:9"
    assert seen["env"]["CUDA_VISIBLE_DEVICES"] == "2,3"
    (tmp_path / "learn-sandbox.json").unlink()
    learning.sandbox_address(Plan(tmp_path))
    assert seen["env"] is None  # one GPU: the recipe's own environment


@pytest.mark.parametrize("gpus", ["0,,1", "0,0", ","])
def test_a_gpu_list_with_gaps_or_repeats_is_refused(tmp_path, gpus):
    with pytest.raises(SystemExit):
        main(["--output-root", str(tmp_path), "--gpus", gpus, "--stages", "report"])
