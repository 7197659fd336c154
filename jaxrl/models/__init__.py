"""Policy model: a Flax NNX decoder-only transformer for the Qwen3 and Llama families.

Public API:
    ModelConfig, RopeScaling, ShardingConfig     -- config.py (from_hf_config / to_hf_config, presets)
    tiny_qwen3, tiny_llama, qwen3_0_6b, qwen3_8b, smollm2_135m
    Transformer, init_model                        -- transformer.py (forward contract in its docstring)
    KVCache, LayerCache, init_cache, shard_cache   -- cache.py
Weights are loaded and exported by `jaxrl.checkpoint`; meshes and sharding live in `jaxrl.sharding`.
"""

from jaxrl.models.cache import KVCache, LayerCache, init_cache, shard_cache
from jaxrl.models.config import (
    ModelConfig,
    RopeScaling,
    ShardingConfig,
    qwen3_0_6b,
    qwen3_8b,
    smollm2_135m,
    tiny_llama,
    tiny_qwen3,
)
from jaxrl.models.transformer import Transformer, init_model

__all__ = [
    "KVCache", "LayerCache", "ModelConfig", "RopeScaling", "ShardingConfig", "Transformer", "init_cache",
    "init_model", "qwen3_0_6b", "qwen3_8b", "shard_cache", "smollm2_135m", "tiny_llama", "tiny_qwen3",
]
