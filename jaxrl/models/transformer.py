"""Decoder-only transformer (Qwen3 / Llama families) in Flax NNX.

One forward serves training and the KV-cache sampler:

    logits, new_cache = model(tokens, positions, segment_ids=..., cache=..., cache_index=...)

- tokens, positions: int [B, T]. Positions drive RoPE and are given per token, so left-padded rows
  start at position 0 on their first real token.
- attention_mask [B, T] (1 = real token, 0 = padding) or segment_ids [B, T] (packed sequences:
  a token attends only to earlier tokens of the same nonzero segment; 0 = padding). At most one.
  Neither means every token is real and belongs to one sequence.
- one_sequence_per_row (no cache only): the caller promises each row is one sequence from slot 0
  followed by padding (segment ids 1..1 0..0); the cuDNN path then needs no dense mask (attention.py).
- cache: a `KVCache` from `init_cache`; the T tokens are written at slot `cache_index` (an int
  scalar, the same for all rows) and attend causally to every valid earlier slot. `new_cache` is
  None without a cache.
- logits are float32 [B, T, V]. For long sequences call `hidden_states` and then `logits` on
  chunks of the time axis to bound memory.

Parameter layout (the NNX paths the checkpoint mapping tables target), D model width, N/K query /
kv heads, H head dim, F MLP width, V vocab:
  embedder.embedding [V, D]; layers[i].attn_norm.scale [D]; layers[i].attn.{q_proj [D, N, H],
  k_proj / v_proj [D, K, H], o_proj [N, H, D]}.kernel; layers[i].attn.{q_norm, k_norm}.scale [H]
  (Qwen3); layers[i].mlp_norm.scale [D]; layers[i].mlp.{gate_proj, up_proj [D, F],
  down_proj [F, D]}.kernel; final_norm.scale [D]; lm_head.kernel [D, V] (untied models only).
"""

from __future__ import annotations

import functools
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx
from jax.sharding import Mesh
from jax.sharding import PartitionSpec as P

from jaxrl import sharding as shd
from jaxrl.models import attention as attn_lib
from jaxrl.models.cache import KVCache, LayerCache
from jaxrl.models.config import ModelConfig
from jaxrl.models.rope import apply_rope, rope_cos_sin

_INIT_STD = 0.02

REMAT_POLICIES = {
    "full": None,  # save nothing, recompute the whole block
    "dots": jax.checkpoint_policies.checkpoint_dots_with_no_batch_dims,
}


def _param(rngs: nnx.Rngs | None, shape: tuple[int, ...], spec: P, dtype: Any, ones: bool = False) -> nnx.Param:
    if ones:
        value = jnp.ones(shape, dtype)
    else:
        value = (jax.random.normal(rngs.params(), shape, jnp.float32) * _INIT_STD).astype(dtype)
    # Sharding is applied by jaxrl.sharding from this metadata, never eagerly at creation.
    return nnx.Param(value, out_sharding=tuple(spec), eager_sharding=False)


class RMSNorm(nnx.Module):
    """x / rms(x) * scale, normalised in float32 like transformers' Llama/Qwen3 RMSNorm."""

    def __init__(self, dim: int, eps: float, param_dtype: Any, spec: P):
        self.eps = eps
        self.scale = _param(None, (dim,), spec, param_dtype, ones=True)

    def __call__(self, x: jax.Array) -> jax.Array:
        xf = x.astype(jnp.float32)
        normed = xf * jax.lax.rsqrt(jnp.mean(xf * xf, axis=-1, keepdims=True) + self.eps)
        return normed.astype(x.dtype) * self.scale.get_value().astype(x.dtype)


class Linear(nnx.Module):
    """A bias-free projection stored in its einsum layout."""

    def __init__(self, shape: tuple[int, ...], spec: P, config: ModelConfig, rngs: nnx.Rngs):
        self.kernel = _param(rngs, shape, spec, config.jnp_param_dtype)

    def __call__(self, equation: str, x: jax.Array) -> jax.Array:
        return jnp.einsum(equation, x, self.kernel.get_value().astype(x.dtype))


class Attention(nnx.Module):
    def __init__(self, config: ModelConfig, rngs: nnx.Rngs):
        c, s = config, config.sharding
        d, n, k, h = c.hidden_size, c.num_heads, c.num_kv_heads, c.head_dim
        self.config = config
        self.q_proj = Linear((d, n, h), s.q_dnh, c, rngs)
        self.k_proj = Linear((d, k, h), s.kv_dkh, c, rngs)
        self.v_proj = Linear((d, k, h), s.kv_dkh, c, rngs)
        self.o_proj = Linear((n, h, d), s.o_nhd, c, rngs)
        if c.qk_norm:
            self.q_norm = RMSNorm(h, c.rms_eps, c.jnp_param_dtype, s.qk_norm_h)
            self.k_norm = RMSNorm(h, c.rms_eps, c.jnp_param_dtype, s.qk_norm_h)

    def __call__(
        self,
        x: jax.Array,
        cos: jax.Array,
        sin: jax.Array,
        mask: attn_lib.Mask,
        layer_cache: LayerCache | None,
        cache_index: jax.Array | None,
        impl: str,
    ) -> tuple[jax.Array, LayerCache | None]:
        s = self.config.sharding
        q = shd.constrain(self.q_proj("btd,dnh->btnh", x), s.act_btnh)
        k = self.k_proj("btd,dkh->btkh", x)
        v = self.v_proj("btd,dkh->btkh", x)
        if self.config.qk_norm:
            q, k = self.q_norm(q), self.k_norm(k)
        q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
        new_cache = None
        if layer_cache is not None:
            start = (0, cache_index, 0, 0)
            k_all = jax.lax.dynamic_update_slice(layer_cache.k, k.astype(layer_cache.k.dtype), start)
            v_all = jax.lax.dynamic_update_slice(layer_cache.v, v.astype(layer_cache.v.dtype), start)
            k_all, v_all = shd.constrain(k_all, s.cache_bskh), shd.constrain(v_all, s.cache_bskh)
            new_cache = LayerCache(k=k_all, v=v_all)
            k, v = k_all.astype(x.dtype), v_all.astype(x.dtype)
        out = attn_lib.attend(q, k, v, mask, impl, queries_at_slots=layer_cache is None)
        return self.o_proj("btnh,nhd->btd", out), new_cache


class MLP(nnx.Module):
    """SwiGLU: down(silu(gate(x)) * up(x))."""

    def __init__(self, config: ModelConfig, rngs: nnx.Rngs):
        s, d, f = config.sharding, config.hidden_size, config.intermediate_size
        self.act_spec = s.act_btf
        self.gate_proj = Linear((d, f), s.mlp_in_df, config, rngs)
        self.up_proj = Linear((d, f), s.mlp_in_df, config, rngs)
        self.down_proj = Linear((f, d), s.mlp_out_fd, config, rngs)

    def __call__(self, x: jax.Array) -> jax.Array:
        hidden = jax.nn.silu(self.gate_proj("btd,df->btf", x)) * self.up_proj("btd,df->btf", x)
        return self.down_proj("btf,fd->btd", shd.constrain(hidden, self.act_spec))


class Block(nnx.Module):
    def __init__(self, config: ModelConfig, rngs: nnx.Rngs):
        s = config.sharding
        self.act_spec = s.act_btd
        self.attn_norm = RMSNorm(config.hidden_size, config.rms_eps, config.jnp_param_dtype, s.norm_d)
        self.attn = Attention(config, rngs)
        self.mlp_norm = RMSNorm(config.hidden_size, config.rms_eps, config.jnp_param_dtype, s.norm_d)
        self.mlp = MLP(config, rngs)

    def __call__(self, x, cos, sin, mask, layer_cache, cache_index, impl):
        attn_out, new_cache = self.attn(self.attn_norm(x), cos, sin, mask, layer_cache, cache_index, impl)
        x = x + attn_out
        x = x + self.mlp(self.mlp_norm(x))
        return shd.constrain(x, self.act_spec), new_cache


class Embedder(nnx.Module):
    def __init__(self, config: ModelConfig, rngs: nnx.Rngs):
        shape = (config.vocab_size, config.hidden_size)
        self.embedding = _param(rngs, shape, config.sharding.embed_vd, config.jnp_param_dtype)


class Transformer(nnx.Module):
    def __init__(self, config: ModelConfig, *, rngs: nnx.Rngs):
        s = config.sharding
        self.config = config
        self.embedder = Embedder(config, rngs)
        self.layers = nnx.List([Block(config, rngs) for _ in range(config.num_layers)])
        self.final_norm = RMSNorm(config.hidden_size, config.rms_eps, config.jnp_param_dtype, s.norm_d)
        if not config.tie_embeddings:
            self.lm_head = Linear((config.hidden_size, config.vocab_size), s.lm_head_dv, config, rngs)

    def __call__(
        self,
        tokens: jax.Array,
        positions: jax.Array,
        *,
        attention_mask: jax.Array | None = None,
        segment_ids: jax.Array | None = None,
        cache: KVCache | None = None,
        cache_index: jax.Array | int | None = None,
        one_sequence_per_row: bool = False,
    ) -> tuple[jax.Array, KVCache | None]:
        hidden, new_cache = self.hidden_states(
            tokens, positions, attention_mask=attention_mask, segment_ids=segment_ids, cache=cache,
            cache_index=cache_index, one_sequence_per_row=one_sequence_per_row,
        )
        return self.logits(hidden), new_cache

    def hidden_states(
        self,
        tokens: jax.Array,
        positions: jax.Array,
        *,
        attention_mask: jax.Array | None = None,
        segment_ids: jax.Array | None = None,
        cache: KVCache | None = None,
        cache_index: jax.Array | int | None = None,
        one_sequence_per_row: bool = False,
    ) -> tuple[jax.Array, KVCache | None]:
        """Final-norm hidden states [B, T, D] (compute dtype) and the updated cache."""
        config = self.config
        if tokens.ndim != 2 or positions.shape != tokens.shape:
            raise ValueError(f"tokens and positions must both be [B, T], got {tokens.shape} and {positions.shape}")
        segments = _segments(tokens, attention_mask, segment_ids)
        if (cache is None) != (cache_index is None):
            raise ValueError("cache and cache_index must be given together")
        if one_sequence_per_row and cache is not None:
            raise ValueError("one_sequence_per_row describes rows without a cache; the cache path masks by slot")
        time = tokens.shape[1]
        if cache is None:
            q_slots = jnp.arange(time, dtype=jnp.int32)
            k_segments = segments
        else:
            if cache.batch_size != tokens.shape[0] or len(cache.layers) != config.num_layers:
                raise ValueError(
                    f"cache is for batch {cache.batch_size} and {len(cache.layers)} layers; "
                    f"got batch {tokens.shape[0]} and a {config.num_layers}-layer model"
                )
            # dynamic_update_slice would clamp an overflowing write silently; check what is static.
            end = time + (int(cache_index) if isinstance(cache_index, (int, np.integer)) else 0)
            if end > cache.max_len:
                raise ValueError(f"writing {time} tokens at {cache_index} overflows a cache of {cache.max_len} slots")
            cache_index = jnp.asarray(cache_index, jnp.int32)
            q_slots = cache_index + jnp.arange(time, dtype=jnp.int32)
            k_segments = jax.lax.dynamic_update_slice(cache.segment_ids, segments, (0, cache_index))
            k_segments = shd.constrain(k_segments, config.sharding.cache_bs)
        mask = attn_lib.Mask(
            attn_lib.attention_mask(segments, q_slots, k_segments),
            attn_lib.one_sequence_lengths(segments) if one_sequence_per_row else None,
        )
        cos, sin = rope_cos_sin(positions, config)
        impl = attn_lib.resolve_impl(config)

        x = jnp.take(self.embedder.embedding.get_value(), tokens, axis=0).astype(config.jnp_dtype)
        x = shd.constrain(x, config.sharding.act_btd)
        new_layers = []
        for i, layer in enumerate(self.layers):
            if cache is None and config.remat != "none":
                x = _remat_block(layer, x, cos, sin, mask, impl, REMAT_POLICIES[config.remat])
            else:
                layer_cache = None if cache is None else cache.layers[i]
                x, new_layer_cache = layer(x, cos, sin, mask, layer_cache, cache_index, impl)
                new_layers.append(new_layer_cache)
        x = self.final_norm(x)
        new_cache = None if cache is None else KVCache(layers=tuple(new_layers), segment_ids=k_segments)
        return x, new_cache

    def logits(self, hidden: jax.Array) -> jax.Array:
        """float32 logits [..., V] of final hidden states [..., D] (use on chunks to save memory)."""
        if self.config.tie_embeddings:
            weight = self.embedder.embedding.get_value().astype(hidden.dtype)
            out = vocab_projection(hidden, weight, "...d,vd->...v")
        else:
            weight = self.lm_head.kernel.get_value().astype(hidden.dtype)
            out = vocab_projection(hidden, weight, "...d,dv->...v")
        if out.ndim == 3:
            out = shd.constrain(out, self.config.sharding.logits_btv)
        return out


@functools.partial(jax.custom_vjp, nondiff_argnums=(2,))
def vocab_projection(hidden: jax.Array, weight: jax.Array, equation: str) -> jax.Array:
    """float32 logits of the vocabulary projection, whose backward runs in the compute dtype.

    The logits are accumulated and returned in float32 for an accurate log-softmax. Plain autodiff
    would then carry a float32 cotangent into both backward matmuls, which makes them float32 (TF32)
    GEMMs over the whole vocabulary: on an H200 they took 15% of a Qwen3-0.6B training step. Here the
    cotangent is rounded to the compute dtype first, as a bf16 framework computing bf16 logits would
    have it; both gradients were rounded to that dtype anyway. A float32 model is unaffected.
    """
    return jnp.einsum(equation, hidden, weight, preferred_element_type=jnp.float32)


def _vocab_projection_fwd(hidden, weight, equation):
    return vocab_projection(hidden, weight, equation), (hidden, weight)


def _vocab_projection_bwd(equation, residuals, cotangent):
    hidden, weight = residuals
    _, pullback = jax.vjp(lambda h, w: jnp.einsum(equation, h, w), hidden, weight)
    return pullback(cotangent.astype(jnp.result_type(hidden, weight)))


vocab_projection.defvjp(_vocab_projection_fwd, _vocab_projection_bwd)


def _segments(tokens: jax.Array, attention_mask: jax.Array | None, segment_ids: jax.Array | None) -> jax.Array:
    if attention_mask is not None and segment_ids is not None:
        raise ValueError("pass attention_mask or segment_ids, not both")
    given = segment_ids if segment_ids is not None else attention_mask
    if given is None:
        return jnp.ones(tokens.shape, jnp.int32)
    if given.shape != tokens.shape:
        raise ValueError(f"attention_mask/segment_ids must be {tokens.shape}, got {given.shape}")
    return given.astype(jnp.int32)


def _remat_block(layer: Block, x, cos, sin, mask: attn_lib.Mask, impl: str, policy) -> jax.Array:
    def run(block: Block, x, cos, sin, mask):
        return block(x, cos, sin, mask, None, None, impl)[0]

    return nnx.remat(run, policy=policy)(layer, x, cos, sin, mask)


def init_model(config: ModelConfig, *, seed: int = 0, mesh: Mesh | None = None) -> Transformer:
    """A randomly initialised model (norms 1, other weights N(0, 0.02^2)), created directly in its
    sharded layout when `mesh` is given; the values depend only on `seed`, not on the mesh.

    Each parameter comes from a small jitted initializer (one compilation per shape and sharding):
    jitting the whole constructor instead takes minutes to compile for billion-parameter models.
    """
    graphdef, abstract_state = nnx.split(nnx.eval_shape(lambda: Transformer(config, rngs=nnx.Rngs(seed))))
    root = jax.random.key(seed)
    leaves = []
    for index, (path, variable) in enumerate(nnx.to_flat_state(abstract_state)):
        shape, dtype = variable.get_value().shape, variable.get_value().dtype
        sharding = None if mesh is None else shd.named_sharding(mesh, shd.variable_spec(variable), shape)
        init = _leaf_initializer(shape, jnp.dtype(dtype).name, path[-1] == "scale", sharding)
        leaves.append((path, variable.replace(init(jax.random.fold_in(root, index)))))
    return nnx.merge(graphdef, nnx.from_flat_state(leaves))


@functools.lru_cache(maxsize=None)
def _leaf_initializer(shape: tuple[int, ...], dtype: str, ones: bool, sharding) -> Any:
    def init(key):
        if ones:
            return jnp.ones(shape, dtype)
        return (jax.random.normal(key, shape, jnp.float32) * _INIT_STD).astype(dtype)

    return jax.jit(init, out_shardings=sharding)
