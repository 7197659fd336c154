"""Hugging Face checkpoint folders: load (safetensors, single or sharded) and export.

A folder holds config.json and either model.safetensors or shards listed by
model.safetensors.index.json. `export_hf` writes the same layout back (optionally sharded, and the
tokenizer if one is given) so transformers' `AutoModelForCausalLM.from_pretrained` loads it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx
from jax.sharding import Mesh
from safetensors import safe_open
from safetensors.numpy import save_file

from jaxrl.checkpoint.loader import TensorSource, build_model
from jaxrl.checkpoint.mapping import HF_RULES, map_target, nnx_name
from jaxrl.models.config import ModelConfig
from jaxrl.models.transformer import Transformer

SINGLE_FILE = "model.safetensors"
INDEX_FILE = "model.safetensors.index.json"


def safetensors_files(folder: Path) -> list[Path]:
    """The weight files of a checkpoint folder, from its index when sharded."""
    index = folder / INDEX_FILE
    if index.is_file():
        with open(index) as f:
            weight_map = json.load(f)["weight_map"]
        files = [folder / name for name in sorted(set(weight_map.values()))]
    elif (folder / SINGLE_FILE).is_file():
        files = [folder / SINGLE_FILE]
    else:
        raise FileNotFoundError(f"{folder} has neither {SINGLE_FILE} nor {INDEX_FILE}")
    for path in files:
        if not path.is_file():
            raise FileNotFoundError(f"{path} is listed in {INDEX_FILE} but missing")
    return files


def iter_safetensors(files: list[Path]) -> Iterator[tuple[str, Any]]:
    """(name, reader) for every tensor, read only when its reader is called (before the next item)."""
    for path in files:
        with safe_open(str(path), framework="numpy") as f:
            for name in f.keys():
                yield name, (lambda f=f, name=name: f.get_tensor(name))


def load_hf_checkpoint(
    folder: str | Path,
    dtype: Any = None,
    mesh: Mesh | None = None,
    *,
    param_dtype: Any = None,
    **config_overrides: Any,
) -> tuple[Transformer, ModelConfig]:
    """Loads a Qwen3/Llama HF folder into a model sharded over `mesh` (default: one device).

    dtype: compute dtype (default: the checkpoint's `dtype`/`torch_dtype`); param_dtype: storage
    dtype (default: dtype). config_overrides set other ModelConfig fields (remat, attention_impl...).
    """
    folder = Path(folder)
    config = ModelConfig.from_hf_config(folder, **config_overrides)
    if dtype is not None or param_dtype is not None:
        config = config.with_dtype(dtype or config.dtype, param_dtype)
    tensors: TensorSource = iter_safetensors(safetensors_files(folder))
    return build_model(config, tensors, mesh), config


def hf_state_dict(model: Transformer, config: ModelConfig, dtype: Any = None) -> dict[str, np.ndarray]:
    """The model's weights as HF-named numpy arrays in the torch layout (gathered to the host)."""
    rules = HF_RULES[config.family]
    out: dict[str, np.ndarray] = {}
    for path, variable in nnx.to_flat_state(nnx.state(model, nnx.Param)):
        name = nnx_name(path)
        mapped = map_target(rules, name)
        if mapped is None:
            raise ValueError(f"no HF name for parameter {name!r}")
        hf_name, rule = mapped
        array = _to_host(variable.get_value())
        array = np.ascontiguousarray(rule.backward(array, config))
        out[hf_name] = array.astype(jnp.dtype(dtype)) if dtype is not None else array
    return out


def _to_host(x: jax.Array) -> np.ndarray:
    if x.is_fully_addressable:
        return np.asarray(jax.device_get(x))
    from jax.experimental import multihost_utils

    return np.asarray(multihost_utils.process_allgather(x, tiled=True))


def export_hf(
    model: Transformer,
    config: ModelConfig,
    folder: str | Path,
    *,
    dtype: Any = None,
    max_shard_bytes: int | None = None,
    tokenizer: Any = None,
) -> Path:
    """Writes config.json and safetensors (sharded with an index past `max_shard_bytes`).

    dtype defaults to the parameter dtype. On several hosts every process must call this (the
    weights are gathered collectively); only process 0 writes.
    """
    folder = Path(folder)
    tensors = hf_state_dict(model, config, dtype)
    if jax.process_index() != 0:
        return folder
    folder.mkdir(parents=True, exist_ok=True)
    hf_config = config.to_hf_config()
    if dtype is not None:
        hf_config["torch_dtype"] = jnp.dtype(dtype).name
    with open(folder / "config.json", "w") as f:
        json.dump(hf_config, f, indent=2)
    shards = _split(tensors, max_shard_bytes)
    if len(shards) == 1:
        save_file(shards[0], str(folder / SINGLE_FILE), metadata={"format": "pt"})
    else:
        weight_map = {}
        for i, shard in enumerate(shards):
            name = f"model-{i + 1:05d}-of-{len(shards):05d}.safetensors"
            save_file(shard, str(folder / name), metadata={"format": "pt"})
            weight_map.update({key: name for key in shard})
        total = sum(a.nbytes for a in tensors.values())
        with open(folder / INDEX_FILE, "w") as f:
            json.dump({"metadata": {"total_size": total}, "weight_map": weight_map}, f, indent=2)
    if tokenizer is not None:
        tokenizer.save_pretrained(str(folder))
    return folder


def _split(tensors: dict[str, np.ndarray], max_bytes: int | None) -> list[dict[str, np.ndarray]]:
    if max_bytes is not None and max_bytes <= 0:
        raise ValueError(f"max_shard_bytes must be positive, got {max_bytes}")
    shards: list[dict[str, np.ndarray]] = [{}]
    size = 0
    for name, array in tensors.items():
        if max_bytes is not None and shards[-1] and size + array.nbytes > max_bytes:
            shards.append({})
            size = 0
        shards[-1][name] = array
        size += array.nbytes
    return shards
