"""GGUF files (llama.cpp format): config from the metadata, weights dequantized by the gguf package.

Every tensor type the gguf package can dequantize is accepted (F32, F16, BF16, Q8_0, Q4_0, Q4_1,
the K-quants...); weights are dequantized to float32 on the host, renamed to HF names through
`GGUF_RULES` (which also undoes llama.cpp's Q/K row permutation for Llama models) and then loaded
like a HF checkpoint, in the dtype asked for. The tokenizer is built by transformers from the same
file (`jaxrl.checkpoint.tokenizer.load_tokenizer`).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
from jax.sharding import Mesh

from jaxrl.checkpoint.loader import build_model
from jaxrl.checkpoint.mapping import GGUF_RULES, map_source
from jaxrl.models.config import ModelConfig, RopeScaling
from jaxrl.models.transformer import Transformer

_FAMILIES = {"llama": "llama", "qwen3": "qwen3"}


def _reader(path: str | Path):
    import gguf

    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no GGUF file at {path}")
    return gguf.GGUFReader(str(path))


def _field(reader, key: str, default: Any = ...) -> Any:
    field = reader.fields.get(key)
    if field is None:
        if default is ...:
            raise ValueError(f"GGUF metadata lacks {key!r}")
        return default
    return field.contents()


def dequantize(tensor) -> np.ndarray:
    """A GGUF tensor as float32 in numpy (row-major, torch) order: ggml's dims reversed."""
    import gguf

    values = gguf.quants.dequantize(tensor.data, tensor.tensor_type)
    shape = tuple(int(d) for d in reversed(tensor.shape))
    return np.asarray(values, dtype=np.float32).reshape(shape)


def gguf_config(reader, **overrides: Any) -> ModelConfig:
    """A ModelConfig from GGUF metadata (`<arch>.block_count`, `<arch>.attention.head_count`...)."""
    arch = _field(reader, "general.architecture")
    family = _FAMILIES.get(arch)
    if family is None:
        raise ValueError(f"unsupported GGUF architecture {arch!r}; supported: {sorted(_FAMILIES)}")
    names = {t.name for t in reader.tensors}
    if "rope_freqs.weight" in names:
        raise ValueError("GGUF files with per-frequency rope factors (rope_freqs.weight) are not supported")

    def arch_field(key: str, default: Any = ...) -> Any:
        return _field(reader, f"{arch}.{key}", default)

    hidden = int(arch_field("embedding_length"))
    num_heads = int(arch_field("attention.head_count"))
    vocab = arch_field("vocab_size", None)
    if vocab is None:
        vocab = len(_field(reader, "tokenizer.ggml.tokens"))
    eos = _field(reader, "tokenizer.ggml.eos_token_id", None)
    config = ModelConfig(
        family=family,
        vocab_size=int(vocab),
        hidden_size=hidden,
        num_layers=int(arch_field("block_count")),
        num_heads=num_heads,
        num_kv_heads=int(arch_field("attention.head_count_kv", num_heads)),
        head_dim=int(arch_field("attention.key_length", hidden // num_heads)),
        intermediate_size=int(arch_field("feed_forward_length")),
        rope_theta=float(arch_field("rope.freq_base", 10000.0)),
        rope_scaling=_rope_scaling(arch_field),
        rms_eps=float(arch_field("attention.layer_norm_rms_epsilon")),
        tie_embeddings="output.weight" not in names,
        max_position_embeddings=int(arch_field("context_length", 32768)),
        bos_token_id=_field(reader, "tokenizer.ggml.bos_token_id", None),
        eos_token_ids=() if eos is None else (int(eos),),
    )
    return config.replace(**overrides) if overrides else config


def _rope_scaling(arch_field) -> RopeScaling | None:
    kind = arch_field("rope.scaling.type", "none")
    if kind == "none":
        return None
    factor = float(arch_field("rope.scaling.factor"))
    if kind == "linear":
        return RopeScaling(rope_type="linear", factor=factor)
    if kind == "yarn":
        original = int(arch_field("rope.scaling.original_context_length"))
        return RopeScaling(rope_type="yarn", factor=factor, original_max_position_embeddings=original)
    raise ValueError(f"unsupported GGUF rope scaling {kind!r}")


def iter_gguf_as_hf(reader, config: ModelConfig) -> Iterator[tuple[str, Any]]:
    """(HF name, reader) for every GGUF tensor, dequantized and un-permuted when read."""
    rules = GGUF_RULES[config.family]
    for tensor in reader.tensors:
        mapped = map_source(rules, tensor.name)
        if mapped is None:
            raise ValueError(f"GGUF tensor {tensor.name!r} has no mapping for the {config.family} family")
        hf_name, rule = mapped
        yield hf_name, (lambda tensor=tensor, rule=rule: rule.forward(dequantize(tensor), config))


def load_gguf(
    path: str | Path,
    dtype: Any = "float32",
    mesh: Mesh | None = None,
    *,
    param_dtype: Any = None,
    **config_overrides: Any,
) -> tuple[Transformer, ModelConfig]:
    """Loads a Llama/Qwen3 GGUF file into a model sharded over `mesh` (default: one device)."""
    reader = _reader(path)
    config = gguf_config(reader, **config_overrides).with_dtype(dtype, param_dtype)
    return build_model(config, iter_gguf_as_hf(reader, config), mesh), config
