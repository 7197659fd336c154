"""Masked grouped-query attention: a reference path in plain XLA and a cuDNN fast path.

Both paths take the same boolean mask [B, T, S] built by `attention_mask`, so they agree up to
floating-point rounding. The mask always lets a query see its own slot: a padding query (segment 0)
then attends only to itself instead of to nothing, which keeps every softmax row finite (no NaN
leaking into losses through masked positions) without changing any real token's output.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from jaxrl.models.config import ModelConfig

_FAST_DTYPES = (jnp.bfloat16, jnp.float16)


def attention_mask(q_segments: jax.Array, q_slots: jax.Array, k_segments: jax.Array) -> jax.Array:
    """Boolean [B, T, S]: causal by slot, same nonzero segment, plus each query's own slot.

    q_segments [B, T] and k_segments [B, S] are segment ids (0 = padding / empty slot);
    q_slots [T] are the key-slot indices the queries were written to.
    """
    k_slots = jnp.arange(k_segments.shape[1], dtype=jnp.int32)
    causal = k_slots[None, None, :] <= q_slots[None, :, None]
    same_segment = (q_segments[:, :, None] == k_segments[:, None, :]) & (k_segments[:, None, :] != 0)
    own_slot = k_slots[None, None, :] == q_slots[None, :, None]
    return causal & (same_segment | own_slot)


def fast_path_supported(config: ModelConfig) -> bool:
    """Whether cuDNN flash attention can run this config on the default backend."""
    return (
        jax.default_backend() == "gpu"
        and config.jnp_dtype in _FAST_DTYPES
        and config.head_dim % 8 == 0
        and config.head_dim <= 128
    )


def resolve_impl(config: ModelConfig) -> str:
    """Maps "auto" to "fast" or "reference"; checks that "fast" is possible."""
    if config.attention_impl == "reference":
        return "reference"
    if config.attention_impl == "fast":
        if not fast_path_supported(config):
            raise ValueError(
                "attention_impl='fast' needs a GPU backend, a bfloat16/float16 dtype and head_dim <= 128 "
                f"(multiple of 8); got backend={jax.default_backend()}, dtype={config.dtype}, head_dim={config.head_dim}"
            )
        return "fast"
    return "fast" if fast_path_supported(config) else "reference"


def reference_attention(q: jax.Array, k: jax.Array, v: jax.Array, mask: jax.Array) -> jax.Array:
    """q [B, T, N, H], k/v [B, S, K, H], mask [B, T, S] -> [B, T, N, H]; softmax in float32."""
    b, t, n, h = q.shape
    kv_heads = k.shape[2]
    q = q.reshape(b, t, kv_heads, n // kv_heads, h)
    logits = jnp.einsum("btkgh,bskh->bkgts", q, k, preferred_element_type=jnp.float32)
    logits = logits * (h**-0.5)
    logits = jnp.where(mask[:, None, None, :, :], logits, jnp.finfo(jnp.float32).min)
    probs = jax.nn.softmax(logits, axis=-1).astype(v.dtype)
    out = jnp.einsum("bkgts,bskh->btkgh", probs, v, preferred_element_type=jnp.float32)
    return out.reshape(b, t, n, h).astype(q.dtype)


def fast_attention(q: jax.Array, k: jax.Array, v: jax.Array, mask: jax.Array) -> jax.Array:
    """cuDNN fused attention with the same mask (turned into an additive bias by JAX)."""
    return jax.nn.dot_product_attention(
        q, k, v, mask=mask[:, None, :, :], scale=q.shape[-1] ** -0.5, implementation="cudnn"
    )


def attend(q: jax.Array, k: jax.Array, v: jax.Array, mask: jax.Array, impl: str) -> jax.Array:
    if impl == "fast":
        return fast_attention(q, k, v, mask)
    return reference_attention(q, k, v, mask)
