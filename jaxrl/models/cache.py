"""Preallocated KV cache for incremental decoding.

Layout: one `LayerCache` per layer holding k and v of shape [B, max_len, kv_heads, head_dim], and
one `segment_ids` array [B, max_len] shared by all layers: 0 marks a slot that must never be
attended to (not yet written, or a padding token), any other value is the segment (sequence) the
slot belongs to. A forward with a cache writes its T tokens at `cache_index` (one scalar for the
whole batch, so rows are left-padded to a common length) with `dynamic_update_slice`; every shape
is static, so a jitted decode step compiles once.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
from jax.sharding import Mesh

from jaxrl import sharding
from jaxrl.models.config import ModelConfig


@jax.tree_util.register_dataclass
@dataclasses.dataclass
class LayerCache:
    k: jax.Array  # [B, S, K, H]
    v: jax.Array  # [B, S, K, H]


@jax.tree_util.register_dataclass
@dataclasses.dataclass
class KVCache:
    layers: tuple[LayerCache, ...]
    segment_ids: jax.Array  # [B, S] int32, 0 = never attend

    @property
    def batch_size(self) -> int:
        return self.segment_ids.shape[0]

    @property
    def max_len(self) -> int:
        return self.segment_ids.shape[1]


def init_cache(config: ModelConfig, batch: int, max_len: int, dtype=None) -> KVCache:
    """An empty cache (all slots invalid) for `batch` rows of up to `max_len` tokens.

    dtype defaults to the model's compute dtype. Shard it with `jaxrl.sharding.shard_cache`.
    """
    if batch <= 0 or max_len <= 0:
        raise ValueError(f"batch and max_len must be positive, got {batch}, {max_len}")
    dtype = config.jnp_dtype if dtype is None else jnp.dtype(dtype)
    shape = (batch, max_len, config.num_kv_heads, config.head_dim)
    layers = tuple(
        LayerCache(k=jnp.zeros(shape, dtype), v=jnp.zeros(shape, dtype)) for _ in range(config.num_layers)
    )
    return KVCache(layers=layers, segment_ids=jnp.zeros((batch, max_len), jnp.int32))


def shard_cache(cache: KVCache, config: ModelConfig, mesh: Mesh) -> KVCache:
    """Places a cache on `mesh` by the config's `cache_bskh` / `cache_bs` specs."""
    spec = config.sharding
    layers = tuple(
        LayerCache(k=sharding.shard_array(layer.k, mesh, spec.cache_bskh),
                   v=sharding.shard_array(layer.v, mesh, spec.cache_bskh))
        for layer in cache.layers
    )
    return KVCache(layers=layers, segment_ids=sharding.shard_array(cache.segment_ids, mesh, spec.cache_bs))
