"""`python -m jaxrl.main sft`: a validated Config -> a fine-tuned policy in <run.output_root>/<run.name>.

The run folder holds config.yaml (the resolved config), metrics.jsonl and tensorboard/ (per step),
checkpoints/ (orbax) and hf/ (the trained policy as a Hugging Face folder, loadable by transformers
and vLLM). Running again with the same run.name resumes from the newest checkpoint (unless
checkpoint.resume=false) and continues exactly as the uninterrupted run would have.

model.source is what `jaxrl.generators.resolve_source` accepts (a Hugging Face folder, a .gguf file,
`smollm2-135m`), or `random:<preset>`: a randomly initialised `jaxrl.models.config` preset (e.g.
`random:tiny_llama`) sized to the tokenizer's vocabulary; model.tokenizer (which may also name a
bundled model) is then required.
Relative data paths are read from the working directory, else from the repository root.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any, NamedTuple

import jax
import numpy as np

from jaxrl.config.loader import REPO_ROOT, dump_config
from jaxrl.config.schema import Config, ConfigError, ModelSection, RunSection, SFTSection
from jaxrl.data.sft_data import SFTExample, read_jsonl, read_kernelbook
from jaxrl.generators import BUNDLED, mesh_from_section, resolve_source
from jaxrl.models import config as presets
from jaxrl.models.config import ModelConfig
from jaxrl.models.transformer import init_model
from jaxrl.training.checkpointing import Checkpointer
from jaxrl.training.metrics_log import MetricsLogger
from jaxrl.training.optim import make_optimizer
from jaxrl.training.sft import BatchOrder, DataPosition, SFTData, SFTLoop, eval_micro_batches, make_sft_loss
from jaxrl.training.trainer import TrainStep, abstract_train_state, init_train_state, model_from_state

log = logging.getLogger(__name__)

RANDOM_PREFIX = "random:"
RANDOM_MAX_POSITIONS = 32768
RANDOM_PRESETS = ("tiny_llama", "tiny_qwen3", "smollm2_135m", "qwen3_0_6b", "qwen3_8b")
CHECKPOINT_DIR = "checkpoints"
EXPORT_DIR = "hf"


def run(config: Config) -> int:
    """Trains, checkpoints and exports as the config says; returns the process exit code (0)."""
    settings = config.sft
    run_dir = run_directory(config.run, "sft")
    mesh = mesh_from_section(config.mesh)
    tokenizer = load_policy_tokenizer(config.model)
    train_examples, eval_examples = read_examples(settings)
    data = SFTData(train_examples, tokenizer, settings.max_seq_len, settings.overlong)
    order = BatchOrder(len(train_examples), settings.batch_size, settings.seed)
    total_steps = order.steps_per_epoch * settings.epochs
    if settings.max_steps:
        total_steps = min(total_steps, settings.max_steps)
    optimizer, schedule = make_optimizer(config.optim, total_steps)
    model_config = policy_config(config.model, tokenizer)

    checkpointer, graphdef, state, shardings, position, _ = start_training(
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
    )
    try:
        state, position = loop.run(state, position)
        export_policy(config, model_from_state(graphdef, state), model_config, run_dir, tokenizer)
    finally:
        logger.close()
        checkpointer.close()
    print(f"sft: {total_steps} steps done; run folder {run_dir}")
    return 0


class TrainStart(NamedTuple):
    """What a training run starts from; `resumed` tells a restored checkpoint from a fresh policy."""

    checkpointer: Checkpointer
    graphdef: Any
    state: Any
    shardings: Any
    position: DataPosition
    resumed: bool


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
        return TrainStart(checkpointer, graphdef, state, shardings, DataPosition(), resumed=False)
    if not config.checkpoint.resume:
        raise ConfigError(f"{run_dir} already has checkpoints (step {latest}); pick another run.name or resume")
    graphdef, target, shardings = abstract_train_state(model_config, optimizer, mesh)
    state, meta = checkpointer.restore(target, latest)
    position = DataPosition.from_dict(meta["data_position"])
    log.info("resuming %s from checkpoint step %d at %s", run_dir, latest, position)
    return TrainStart(checkpointer, graphdef, state, shardings, position, resumed=True)


def export_policy(config: Config, model, model_config: ModelConfig, run_dir: Path, tokenizer: Any) -> None:
    """The trained policy as a Hugging Face folder (`run_dir/hf`), when checkpoint.export_hf asks for it."""
    if config.checkpoint.export_hf:
        from jaxrl.checkpoint import export_hf

        export_hf(model, model_config, run_dir / EXPORT_DIR, dtype=config.checkpoint.export_dtype, tokenizer=tokenizer)


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


def find_path(path: str) -> Path:
    """`path` as given, or relative to the repository root when it does not exist as given."""
    given = Path(path)
    if given.exists() or given.is_absolute():
        return given
    return REPO_ROOT / given if (REPO_ROOT / given).exists() else given


def read_examples(settings: SFTSection) -> tuple[list[SFTExample], list[SFTExample]]:
    """(training examples, held-out examples) as the sft section says."""
    if settings.data is None:
        raise ConfigError("sft.data must name a training JSONL file")
    read = read_kernelbook if settings.format == "kernelbook" else read_jsonl
    examples = read(find_path(settings.data))
    if settings.eval_data is not None:
        return examples, read(find_path(settings.eval_data))
    if settings.eval_fraction == 0:
        return examples, []
    held = max(1, int(round(settings.eval_fraction * len(examples))))
    if held >= len(examples):
        raise ConfigError(f"sft.eval_fraction={settings.eval_fraction} leaves no training example of {len(examples)}")
    order = np.random.default_rng([settings.seed, 2**31 - 1]).permutation(len(examples))
    held_out = set(order[:held].tolist())
    train = [e for i, e in enumerate(examples) if i not in held_out]
    return train, [examples[i] for i in sorted(held_out)]


def load_policy_tokenizer(section: ModelSection) -> Any:
    """The tokenizer of model.tokenizer (a folder, a .gguf file or a bundled model's name), else of model.source."""
    from jaxrl.checkpoint import load_tokenizer

    if section.tokenizer is not None:
        if section.tokenizer in BUNDLED:
            return load_tokenizer(resolve_source(section.tokenizer)[1])
        return load_tokenizer(Path(section.tokenizer).expanduser())
    if section.source.startswith(RANDOM_PREFIX):
        raise ConfigError(f"model.source={section.source!r} is a random model: set model.tokenizer")
    return load_tokenizer(resolve_source(section.source)[1])


def policy_config(section: ModelSection, tokenizer: Any) -> ModelConfig:
    """The architecture the source describes (no weights read) with the section's numerics."""
    source = section.source
    numerics = dict(
        dtype=section.dtype, param_dtype=section.param_dtype, attention_impl=section.attention_impl,
        remat=section.remat,
    )
    if source.startswith(RANDOM_PREFIX):
        preset = source[len(RANDOM_PREFIX):]
        if preset not in RANDOM_PRESETS:
            raise ConfigError(f"unknown random model preset {preset!r}; known: {RANDOM_PRESETS}")
        eos = tokenizer.eos_token_id
        config = getattr(presets, preset)(
            vocab_size=len(tokenizer), bos_token_id=tokenizer.bos_token_id,
            eos_token_ids=() if eos is None else (eos,), **numerics,
        )
        # A random preset's position limit is nominal (RoPE has no table): wide enough for any prompt and
        # completion, and the HF export (which later stages load) says so.
        return config.replace(max_position_embeddings=max(config.max_position_embeddings, RANDOM_MAX_POSITIONS))
    kind, path = resolve_source(source)
    if kind == "gguf":
        import gguf

        from jaxrl.checkpoint.gguf_loader import gguf_config

        return gguf_config(gguf.GGUFReader(str(path)), **numerics)
    return ModelConfig.from_hf_config(path, **numerics)


def load_policy(section: ModelSection, config: ModelConfig, mesh, seed: int = 0):
    """The model with its source's weights (or random ones), laid out on `mesh`."""
    from jaxrl.checkpoint import load_gguf, load_hf_checkpoint

    if section.source.startswith(RANDOM_PREFIX):
        return init_model(config, seed=seed, mesh=mesh)
    kind, path = resolve_source(section.source)
    overrides = dict(attention_impl=config.attention_impl, remat=config.remat)
    if kind == "gguf":
        model, loaded = load_gguf(path, config.dtype, mesh, param_dtype=config.param_dtype, **overrides)
    else:
        model, loaded = load_hf_checkpoint(path, config.dtype, mesh, param_dtype=config.param_dtype, **overrides)
    if loaded != config:
        raise RuntimeError(f"{section.source}: loaded config {loaded} differs from the expected {config}")
    return model
