"""A training run's folder: its name, its checkpoints (a run started again resumes from the newest) and the
Hugging Face export of the trained policy. `sft` and `grpo` (jaxrl.cli) share it."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any, NamedTuple

import jax
import numpy as np

from jaxrl.config.schema import Config, ConfigError, RunSection
from jaxrl.models.config import ModelConfig
from jaxrl.policy import load_policy
from jaxrl.training.checkpointing import Checkpointer
from jaxrl.training.sft import DataPosition
from jaxrl.training.trainer import abstract_train_state, init_train_state

CHECKPOINT_DIR = "checkpoints"
EXPORT_DIR = "hf"


class TrainStart(NamedTuple):
    """What a training run starts from; `resumed` tells a restored checkpoint from a fresh policy, whose
    metadata (`meta`: what the loop saved with it, e.g. GRPO's own step count) is empty."""

    checkpointer: Checkpointer
    graphdef: Any
    state: Any
    shardings: Any
    position: DataPosition
    resumed: bool
    meta: dict


def start_training(config: Config, run_dir: Path, model_config: ModelConfig, optimizer, mesh, seed: int) -> TrainStart:
    """The run folder's checkpointer and the train state: its newest checkpoint's when there is one (and
    checkpoint.resume allows it), else model.source's weights with a fresh optimizer state."""
    checkpointer = Checkpointer(
        run_dir / CHECKPOINT_DIR, max_to_keep=config.checkpoint.max_to_keep, async_save=config.checkpoint.async_save
    )
    latest = checkpointer.latest_step()
    if latest is None:
        model = load_policy(config.model, model_config, mesh, seed=seed)
        graphdef, state, shardings = init_train_state(model, optimizer, mesh, seed)
        return TrainStart(checkpointer, graphdef, state, shardings, DataPosition(), resumed=False, meta={})
    if not config.checkpoint.resume:
        raise ConfigError(f"{run_dir} already has checkpoints (step {latest}); pick another run.name or resume")
    graphdef, target, shardings = abstract_train_state(model_config, optimizer, mesh)
    state, meta = checkpointer.restore(target, latest)
    position = DataPosition.from_dict(meta["data_position"])
    if jax.process_index() == 0:
        print(f"resuming {run_dir} from its checkpoint at step {latest} (data: epoch {position.epoch}, example "
              f"{position.index})", file=sys.stderr, flush=True)
    return TrainStart(checkpointer, graphdef, state, shardings, position, resumed=True, meta=dict(meta))


def export_policy(config: Config, model, model_config: ModelConfig, run_dir: Path, tokenizer: Any) -> None:
    """The trained policy as a Hugging Face folder (`run_dir/hf`), when checkpoint.export_hf asks for it."""
    if config.checkpoint.export_hf:
        from jaxrl.checkpoint import export_hf

        export_hf(model, model_config, run_dir / EXPORT_DIR, dtype=config.checkpoint.export_dtype, tokenizer=tokenizer)


def candidate_dir(run_dir: Path, step: int) -> Path:
    """Where `sft.export_every` exports the policy of `step`."""
    return run_dir / f"{EXPORT_DIR}-step-{step}"


def export_candidate(config: Config, model, model_config: ModelConfig, run_dir: Path, tokenizer: Any, step: int) -> Path:
    """The policy at `step` as a Hugging Face folder beside the final one (`candidate_dir`)."""
    from jaxrl.checkpoint import export_hf

    return export_hf(model, model_config, candidate_dir(run_dir, step), dtype=config.checkpoint.export_dtype,
                     tokenizer=tokenizer)


def run_directory(section: RunSection, prefix: str) -> Path:
    """<output_root>/<name>; without a name, `<prefix>-<timestamp>` (the same on every host)."""
    name = section.name
    if name is None:
        stamp = int(time.time())
        if jax.process_count() > 1:
            from jax.experimental import multihost_utils

            stamp = int(multihost_utils.broadcast_one_to_all(np.int64(stamp)))
        name = f"{prefix}-{time.strftime('%Y%m%d-%H%M%S', time.localtime(stamp))}"
    return Path(section.output_root) / name
