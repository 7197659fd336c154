"""One GRPO step end to end through the real embedded sandbox (Triton interpreter), and the CLI run.

The step uses scripted completions (a correct ReLU kernel, a wrong one, an answer without code) so the
sandbox returns real verdicts of every kind and the HRD advantages are not all zero.
"""

from __future__ import annotations

import dataclasses
import json

import jax
import numpy as np
import pytest
from grpo_helpers import EOS, ToyTokenizer

from jaxrl import sharding as shd
from jaxrl.config import load_config
from jaxrl.config.schema import OptimSection, SandboxSection
from jaxrl.data import load_problems
from jaxrl.evaluation.runner import eval_options
from jaxrl.models.config import tiny_llama
from jaxrl.models.transformer import init_model
from jaxrl.sampling.api import Completion, SamplingParams
from jaxrl.training.advantages import AdvantageConfig
from jaxrl.training.grpo import GRPOLoop, GRPOSettings, SandboxScorer, Task, make_grpo_loss
from jaxrl.training.hrd import RewardModeConfig
from jaxrl.training.losses import LossConfig
from jaxrl.training.metrics_log import MetricsLogger, read_metrics
from jaxrl.training.optim import make_optimizer
from jaxrl.training.rewards import RewardConfig
from jaxrl.training.rollout_log import read_rollouts
from jaxrl.training.sft import DataPosition
from jaxrl.training.trainer import TrainStep, init_train_state
from sandbox_service.client import SandboxClient

from scripted_completions import NO_CODE, RELU_CORRECT, RELU_WRONG



class ScriptedGenerator:
    """Returns the same three completions for every prompt (token ids from the toy tokenizer)."""

    def __init__(self):
        self.tokenizer = ToyTokenizer()
        self.updates = 0

    def encode(self, text):
        return self.tokenizer(text)["input_ids"]

    def decode(self, ids):
        return self.tokenizer.decode(ids)

    def update_model(self, model):
        self.updates += 1

    def generate_from_ids(self, prompt_ids, params: SamplingParams):
        texts = [RELU_CORRECT, RELU_WRONG, NO_CODE]
        assert params.num_samples == len(texts)
        out = []
        for _ in prompt_ids:
            row = []
            for text in texts:
                ids = tuple(self.encode(text)) + (EOS,)
                row.append(Completion(text, ids, (0.0,) * len(ids), "stop"))
            out.append(row)
        return out


def test_one_step_through_the_interpreter_sandbox(kernelbench_path, tmp_path):
    problem = load_problems(kernelbench_path, [1], [19], cpu_sized=True)[0]
    mesh = shd.single_device_mesh()
    config = tiny_llama(eos_token_ids=(EOS,), max_position_embeddings=2048)
    optimizer, schedule = make_optimizer(OptimSection(learning_rate=1e-3, decay="constant"), 1)
    graphdef, state, shardings = init_train_state(init_model(config, seed=0, mesh=mesh), optimizer, mesh, 0)
    loss_config = LossConfig()
    section = SandboxSection(backend="interpreter", workers=1, trials=1, timeout_s=120.0, max_concurrency=3)
    generator = ScriptedGenerator()
    with SandboxClient.embedded(backend="interpreter", workers=1) as client:
        options = dataclasses.replace(eval_options(section), time=False)
        scorer = SandboxScorer(client, options, max_concurrency=3)
        logger = MetricsLogger(tmp_path, tensorboard=False)
        loop = GRPOLoop(
            settings=GRPOSettings(tasks_per_step=1, micro_batch_rows=2, total_steps=1, row_multiple=64),
            step_fn=TrainStep(graphdef, make_grpo_loss(loss_config), optimizer, mesh, shardings),
            generator=generator, scorer=scorer, tasks=[Task(problem.key, "relu:", problem.code)],
            sampling=SamplingParams(num_samples=3, max_new_tokens=2048), loss_config=loss_config,
            advantage_config=AdvantageConfig("grpo"), reward_mode=RewardModeConfig("hrd"),
            reward_config=RewardConfig(timing_available=False), schedule=schedule, logger=logger, progress=False,
        )
        before = jax.device_get(state.params)
        state, position = loop.run(state, DataPosition())
        scorer.close()
        logger.close()
    (values,) = read_metrics(tmp_path)
    assert generator.updates == 1
    assert values["rate/usable"] == 1.0  # no infrastructure failure
    assert values["rate/correct"] == pytest.approx(1 / 3)
    assert values["rate/valid"] == pytest.approx(2 / 3)  # the wrong kernel is valid, the prose is not
    assert values["reward/correct_mean"] == pytest.approx(1 / 3)
    assert values["length/code_tokens_mean"] > 0 and values["length/plan_tokens_mean"] > 0
    assert values["train/ratio_mean"] == pytest.approx(1.0, abs=1e-6)
    assert values["train/grad_norm"] > 0
    after = jax.device_get(state.params)
    assert any(not np.array_equal(a, b) for a, b in zip(jax.tree.leaves(before), jax.tree.leaves(after)))
    assert position == DataPosition(1, 0)


@pytest.mark.slow
def test_tiny_cpu_config_runs(kernelbench_path, tmp_path):
    """`python -m jaxrl.main grpo --config configs/tiny_cpu_grpo.yaml` in-process, with its run folder, on two
    CPU-sized KernelBench problems instead of the config's generated tasks."""
    from jaxrl.cli import grpo as grpo_command

    config = load_config("configs/tiny_cpu_grpo.yaml", [
        f"grpo.dataset={kernelbench_path}", "grpo.levels=[1]", "grpo.ids=[19,21]", f"run.output_root={tmp_path}",
        "run.name=tiny", "grpo.max_steps=1",
        "checkpoint.export_hf=false",
    ])
    assert grpo_command.run(config) == 0
    run_dir = tmp_path / "tiny"
    lines = (run_dir / "metrics.jsonl").read_text().splitlines()
    assert len(lines) == 1 and json.loads(lines[0])["rate/usable"] == 1.0
    assert [r["step"] for r in read_rollouts(run_dir)] == [1] * 4  # 2 tasks x 2 samples
    assert json.loads((run_dir / "rewards.json").read_text())["timing_available"] is False
    assert (run_dir / "checkpoints").exists()

    # The same run.name with more steps resumes after the checkpoint and appends one line.
    config = load_config("configs/tiny_cpu_grpo.yaml", [
        f"grpo.dataset={kernelbench_path}", "grpo.levels=[1]", "grpo.ids=[19,21]", f"run.output_root={tmp_path}",
        "run.name=tiny", "grpo.max_steps=2",
        "checkpoint.export_hf=false",
    ])
    assert grpo_command.run(config) == 0
    steps = [json.loads(line)["step"] for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert steps == [1, 2]
    assert [r["step"] for r in read_rollouts(run_dir)] == [1] * 4 + [2] * 4
