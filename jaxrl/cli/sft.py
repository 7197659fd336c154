"""`python -m jaxrl.main sft`: a validated Config -> a fine-tuned policy in <run.output_root>/<run.name>.

The run folder holds config.yaml (the resolved config), metrics.jsonl and tensorboard/ (per step),
checkpoints/ (orbax) and hf/ (the trained policy as a Hugging Face folder, loadable by transformers
and vLLM), with hf-step-<N>/ every sft.export_every steps (candidates to choose a checkpoint from).
Running again with the same run.name resumes from the newest checkpoint (unless checkpoint.resume=false)
and continues exactly as the uninterrupted run would have.

model.source is anything `jaxrl.policy` loads, `random:<preset>` included (model.tokenizer is then required).
Relative data paths are read from the working directory, else from the repository root.
"""

from __future__ import annotations

import logging
from pathlib import Path

import jax
import numpy as np

from jaxrl.config.loader import REPO_ROOT, dump_config
from jaxrl.config.schema import Config, ConfigError, SFTSection
from jaxrl.data.sft_data import SFTExample, read_jsonl, read_kernelbook
from jaxrl.policy import check_source, load_tokenizer, mesh_from_section, policy_config
from jaxrl.training.metrics_log import MetricsLogger
from jaxrl.training.optim import make_optimizer
from jaxrl.training.run_folder import export_candidate, export_policy, run_directory, start_training
from jaxrl.training.sft import BatchOrder, SFTData, SFTLoop, eval_micro_batches, make_sft_loss
from jaxrl.training.trainer import TrainStep, model_from_state

log = logging.getLogger(__name__)


def run(config: Config) -> int:
    """Trains, checkpoints and exports as the config says; returns the process exit code (0)."""
    settings = config.sft
    check_source(config.model)  # bad inputs fail in a second, before any model work
    train_examples, eval_examples = read_examples(settings)
    run_dir = run_directory(config.run, "sft")
    mesh = mesh_from_section(config.mesh)
    tokenizer = load_tokenizer(config.model)
    data = SFTData(train_examples, tokenizer, settings.max_seq_len, settings.overlong)
    order = BatchOrder(len(train_examples), settings.batch_size, settings.seed)
    total_steps = order.steps_per_epoch * settings.epochs
    if settings.max_steps:
        total_steps = min(total_steps, settings.max_steps)
    optimizer, schedule = make_optimizer(config.optim, total_steps)
    model_config = policy_config(config.model, tokenizer)

    checkpointer, graphdef, state, shardings, position, _, _ = start_training(
        config, run_dir, model_config, optimizer, mesh, settings.seed
    )
    if jax.process_index() == 0:
        dump_config(config, run_dir / "config.yaml")

    eval_batches: list[dict[str, np.ndarray]] = []
    if eval_examples:
        eval_data = SFTData(eval_examples, tokenizer, settings.max_seq_len, settings.overlong)
        eval_batches, dropped = eval_micro_batches(eval_data, settings.micro_batch_rows)
        if dropped:
            log.warning("%d of %d held-out examples are longer than max_seq_len", dropped, len(eval_examples))
    logger = MetricsLogger(run_dir, start_step=int(state.step), enabled=jax.process_index() == 0)
    loop = SFTLoop(
        step_fn=TrainStep(graphdef, make_sft_loss(settings.logits_chunk), optimizer, mesh, shardings),
        data=data,
        order=order,
        micro_batch_rows=settings.micro_batch_rows,
        total_steps=total_steps,
        schedule=schedule,
        eval_batches=eval_batches,
        eval_every=settings.eval_every,
        log_every=settings.log_every,
        checkpointer=checkpointer,
        checkpoint_every=config.checkpoint.every,
        logger=logger,
        export_every=settings.export_every,
        export=lambda step, state: export_candidate(config, model_from_state(graphdef, state), model_config, run_dir,
                                                    tokenizer, step),
    )
    try:
        state, position = loop.run(state, position)
        export_policy(config, model_from_state(graphdef, state), model_config, run_dir, tokenizer)
    finally:
        logger.close()
        checkpointer.close()
    print(f"sft: {total_steps} steps done; run folder {run_dir}")
    return 0


def find_path(path: str) -> Path:
    """`path` as given, or relative to the repository root when it does not exist as given."""
    given = Path(path)
    if given.exists() or given.is_absolute():
        return given
    return REPO_ROOT / given if (REPO_ROOT / given).exists() else given


def _existing(key: str, path: str) -> Path:
    found = find_path(path)
    if not found.is_file():
        raise ConfigError(f"{key}={path}: no such file (looked in the working directory and in {REPO_ROOT})")
    return found


def read_examples(settings: SFTSection) -> tuple[list[SFTExample], list[SFTExample]]:
    """(training examples, held-out examples) as the sft section says."""
    if settings.data is None:
        raise ConfigError("sft.data must name a training JSONL file")
    read = read_kernelbook if settings.format == "kernelbook" else read_jsonl
    examples = read(_existing("sft.data", settings.data))
    if settings.eval_data is not None:
        return examples, read(_existing("sft.eval_data", settings.eval_data))
    if settings.eval_fraction == 0:
        return examples, []
    held = max(1, int(round(settings.eval_fraction * len(examples))))
    if held >= len(examples):
        raise ConfigError(f"sft.eval_fraction={settings.eval_fraction} leaves no training example of {len(examples)}")
    order = np.random.default_rng([settings.seed, 2**31 - 1]).permutation(len(examples))
    held_out = set(order[:held].tolist())
    train = [e for i, e in enumerate(examples) if i not in held_out]
    return train, [examples[i] for i in sorted(held_out)]
