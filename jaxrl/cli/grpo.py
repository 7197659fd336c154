"""`python -m jaxrl.main grpo`: a validated Config -> a policy trained by GRPO + HRD in <run.output_root>/<run.name>.

The run folder holds config.yaml (the resolved config), rewards.json (the reward settings, stating
whether speedups were measured or count as 1 on the CPU interpreter), metrics.jsonl and tensorboard/
(per step), rollouts.jsonl (per sample: verdict, rewards, advantages, lengths; `rollout_log`),
checkpoints/ (orbax: parameters, optimizer state, RNG, step and the task-order position) and hf/ (the
trained policy as a Hugging Face folder). Running again with the same run.name resumes from the newest
checkpoint (unless checkpoint.resume=false).

The model, tokenizer and mesh are read by `jaxrl.policy`, as for `sft` (`model.source` may be `random:<preset>`).
One process per host holds the parameters once: the sampler decodes with the train state's arrays
(`Sampler.update_model` after every update), so there is no weight copy. With grpo.beta > 0 a frozen
copy of the initial parameters is kept as the KL reference. On several processes only process 0 opens
the sandbox (client or embedded server) and decides whether it times kernels; the others receive its
verdicts and that decision (`grpo.collect_rollout`, `multihost.broadcast_json`).
"""

from __future__ import annotations

import dataclasses
import json
import logging
from pathlib import Path
from typing import Any

import jax
from flax import nnx

from jaxrl.config.loader import dump_config
from jaxrl.config.schema import Config, ConfigError, GRPOSection, SandboxSection
from jaxrl.data import build_messages
from jaxrl.data.engine.api import Engine
from jaxrl.data.prompts import render_prompt
from jaxrl.data.task_source import KERNELBENCH, TaskSelection, source_kind
from jaxrl.data.task_source import load_tasks as load_task_specs
from jaxrl.evaluation.runner import eval_options, open_client
from jaxrl.models.config import ModelConfig
from jaxrl.policy import check_source, load_policy, load_tokenizer, mesh_from_section, policy_config
from jaxrl.sampling.sampler import Sampler, SamplerConfig, params_from_section
from jaxrl.training.advantages import AdvantageConfig
from jaxrl.training.grpo import GRPOLoop, GRPOSettings, SandboxScorer, Task, make_grpo_loss
from jaxrl.training.hrd import RewardModeConfig
from jaxrl.training.losses import LossConfig
from jaxrl.training.metrics_log import MetricsLogger
from jaxrl.training.multihost import broadcast_json
from jaxrl.training.optim import make_optimizer
from jaxrl.training.rewards import RewardConfig, SpeedupGuard
from jaxrl.training.rollout_log import RolloutLogger
from jaxrl.training.run_folder import export_policy, run_directory, start_training
from jaxrl.training.trainer import TrainStep, model_from_state
from sandbox_service.client import SandboxClient

log = logging.getLogger(__name__)


def run(config: Config) -> int:
    """Trains, checkpoints and exports as the config says; returns the process exit code (0)."""
    settings = config.grpo
    check_source(config.model)  # bad inputs fail in a second, before any model work
    run_dir = run_directory(config.run, "grpo")
    mesh = mesh_from_section(config.mesh)
    tokenizer = load_tokenizer(config.model)
    tasks = load_tasks(settings, tokenizer)
    updates = settings.max_steps * settings.num_iterations
    optimizer, schedule = make_optimizer(config.optim, updates)
    model_config = policy_config(config.model, tokenizer)
    loss_config = LossConfig(
        epsilon_low=settings.epsilon_low, epsilon_high=settings.epsilon_high, beta=settings.beta,
        kl_estimator=settings.kl_estimator, loss_agg_mode=settings.loss_agg_mode,
        max_completion_length=config.sampling.max_new_tokens,
    )
    scores = jax.process_index() == 0
    # Process 0's answer on every process: the rewards depend on it.
    timed = broadcast_json(timing_available(settings, config.sandbox) if scores else None)
    reward_config = RewardConfig(speedup_cap=settings.speedup_cap, timing_available=timed)
    # The sandbox first: an unreachable target fails in seconds, not after the model has loaded.
    client, scorer = open_scorer(config.sandbox, reward_config.timing_available) if scores else (None, None)
    try:
        return _train(config, run_dir, mesh, tokenizer, tasks, optimizer, schedule, model_config, loss_config,
                      reward_config, scorer)
    finally:
        if scorer is not None:
            scorer.close()
            client.close()


def _train(config: Config, run_dir: Path, mesh: Any, tokenizer: Any, tasks: list[Task], optimizer: Any,
           schedule: Any, model_config: ModelConfig, loss_config: LossConfig, reward_config: RewardConfig,
           scorer: SandboxScorer | None) -> int:
    """The training itself, once the inputs are checked and the sandbox answers (None: not process 0)."""
    settings = config.grpo
    checkpointer, graphdef, state, shardings, position, resumed, meta = start_training(
        config, run_dir, model_config, optimizer, mesh, settings.seed
    )
    ref_params = None
    if settings.beta > 0 and resumed:
        # The KL reference is the initial policy, read again from model.source.
        ref_params = nnx.to_pure_dict(nnx.split(load_policy(config.model, model_config, mesh, seed=settings.seed))[1])
    elif settings.beta > 0:
        # A frozen copy: the train state's own arrays are donated to each update.
        ref_params = jax.tree.map(lambda x: x.copy(), state.params)
    if jax.process_index() == 0:
        dump_config(config, run_dir / "config.yaml")
        (run_dir / "rewards.json").write_text(json.dumps(reward_config.metadata(), indent=2) + "\n")

    sampler = Sampler(model_from_state(graphdef, state), tokenizer, SamplerConfig.from_section(config.sampling),
                      mesh=mesh)
    # GRPO's own count: a step whose groups all had zero advantage made no update (the optimizer's did not move).
    done_steps = int(meta.get("grpo_step", int(state.step) // settings.num_iterations))
    logger = MetricsLogger(run_dir, start_step=done_steps, enabled=jax.process_index() == 0)
    rollout_logger = RolloutLogger(run_dir, start_step=done_steps, log_completions=settings.log_completions,
                                   enabled=jax.process_index() == 0)
    loop = GRPOLoop(
        settings=GRPOSettings(
            tasks_per_step=settings.tasks_per_step, micro_batch_rows=settings.micro_batch_rows,
            total_steps=settings.max_steps, num_iterations=settings.num_iterations,
            tasks_per_call=settings.tasks_per_call, row_multiple=settings.row_multiple,
            logits_chunk=settings.logits_chunk, reuse_sampler_logprobs=settings.reuse_sampler_logprobs,
            log_every=settings.log_every, checkpoint_every=config.checkpoint.every, seed=settings.seed,
            dynamic_sampling=settings.dynamic_sampling, max_sampling_rounds=settings.max_sampling_rounds,
        ),
        step_fn=TrainStep(graphdef, make_grpo_loss(loss_config, settings.logits_chunk, config.sampling.temperature),
                          optimizer, mesh, shardings),
        generator=sampler,
        scorer=scorer,
        tasks=tasks,
        sampling=params_from_section(config.sampling, num_samples=settings.group_size),
        loss_config=loss_config,
        advantage_config=AdvantageConfig(settings.advantage_estimator, settings.scale_rewards),
        reward_mode=RewardModeConfig(settings.reward_mode, settings.alpha, settings.uniform_beta),
        reward_config=reward_config,
        schedule=schedule,
        ref_params=ref_params,
        speedup_guard=SpeedupGuard(settings.speedup_min_ref_us, settings.speedup_noise_floor),
        checkpointer=checkpointer,
        logger=logger,
        rollout_logger=rollout_logger,
    )
    try:
        state, position = loop.run(state, position, done_steps)
        export_policy(config, model_from_state(graphdef, state), model_config, run_dir, tokenizer)
    finally:
        logger.close()
        rollout_logger.close()
        checkpointer.close()
    print(f"grpo: {settings.max_steps} steps done; run folder {run_dir}")
    return 0


def open_scorer(sandbox: SandboxSection, timed: bool) -> tuple[SandboxClient, SandboxScorer]:
    """The sandbox client (an embedded server when no target is configured) and a scorer on it."""
    options = eval_options(sandbox)
    if not timed:
        options = dataclasses.replace(options, time=False)
    client = open_client(sandbox)
    return client, SandboxScorer(client, options, sandbox.max_concurrency)


def load_tasks(settings: GRPOSection, tokenizer, engine: Engine | None = None) -> list[Task]:
    """The configured tasks (`jaxrl.data.task_source`) with their input sets, prompted exactly as evaluation
    prompts them. Training on KernelBench is allowed but warned about: it is the evaluation benchmark.
    engine: the generator of the `generated` source (None: the real one)."""
    selection = TaskSelection.from_section(settings)
    try:
        if source_kind(selection.dataset) == KERNELBENCH:
            log.warning("grpo.dataset=%s: training on KernelBench, the benchmark `eval` reports on; its scores are "
                        "no longer held out (the default, dataset=generated, trains on the data engine's tasks)",
                        selection.dataset)
        tasks = load_task_specs(selection, engine)
    except (ValueError, FileNotFoundError) as exc:
        raise ConfigError(f"grpo: {exc}") from exc
    if not tasks:
        raise ConfigError("grpo: the task selection is empty")
    return [Task(t.key, render_prompt(tokenizer, build_messages(t.code)), t.code, t.input_sets) for t in tasks]


def timing_available(settings: GRPOSection, sandbox: SandboxSection) -> bool:
    """Whether the sandbox times kernels: grpo.timed, or when null: not on the CPU interpreter (an
    embedded `auto` sandbox uses the interpreter when torch sees no CUDA device)."""
    if settings.timed is not None:
        return settings.timed
    if sandbox.backend != "auto":
        return sandbox.backend == "cuda"
    if sandbox.targets:
        return True
    import torch

    return bool(torch.cuda.is_available())
