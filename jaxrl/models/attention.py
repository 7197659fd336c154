"""Masked grouped-query attention: a reference path in plain XLA and a cuDNN fast path.

Both paths take the same `Mask`, whose boolean [B, T, S] `dense` part (built by `attention_mask`)
defines the semantics, so they agree up to floating-point rounding on every real token. The dense mask
always lets a query see its own slot: a padding query (segment 0) then attends only to itself instead
of to nothing, which keeps every softmax row finite (no NaN leaking into losses through masked
positions) without changing any real token's output.

The fast path hands cuDNN as little of the dense mask as the layout allows, because cuDNN reads a
dense mask as an additive [B, T, S] bias on every head and cannot skip the tiles above the diagonal:
- no cache (query t sits at key slot t): cuDNN's own causal mask is added, so masked tiles are skipped;
- and `Mask.seq_lengths` given (each row is one sequence from slot 0 followed by padding, as in GRPO
  rows and unpacked SFT rows): cuDNN's causal + padding masks replace the dense mask entirely.
Padding queries then get cuDNN's output for an empty row instead of their own value; no loss reads them.
"""

from __future__ import annotations

from typing import NamedTuple

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


class Mask(NamedTuple):
    """Who may attend to whom (a pytree, so it passes through remat like any array)."""

    dense: jax.Array  # bool [B, T, S] from `attention_mask`: the definition, used by the reference path
    seq_lengths: jax.Array | None = None  # int32 [B] real tokens per row, when each row is one sequence


def one_sequence_lengths(segments: jax.Array) -> jax.Array:
    """int32 [B] nonzero-segment tokens per row: the length of a row holding one sequence from slot 0."""
    return (segments != 0).sum(axis=1, dtype=jnp.int32)


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


def fast_attention(
    q: jax.Array, k: jax.Array, v: jax.Array, mask: Mask, queries_at_slots: bool, implementation: str = "cudnn"
) -> jax.Array:
    """Fused attention with the least dense masking the layout allows (module docstring).

    `queries_at_slots`: query t sits at key slot t (no cache), so a causal mask is exact.
    `implementation` is "cudnn" in the model; tests pass "xla" to check the argument forms on the CPU.
    """
    scale = q.shape[-1] ** -0.5
    if queries_at_slots and mask.seq_lengths is not None:
        lengths = mask.seq_lengths
        return jax.nn.dot_product_attention(
            q, k, v, scale=scale, is_causal=True, query_seq_lengths=lengths, key_value_seq_lengths=lengths,
            implementation=implementation,
        )
    return jax.nn.dot_product_attention(
        q, k, v, mask=mask.dense[:, None, :, :], scale=scale, is_causal=queries_at_slots,
        implementation=implementation,
    )


def attend(q: jax.Array, k: jax.Array, v: jax.Array, mask: Mask, impl: str, queries_at_slots: bool) -> jax.Array:
    if impl == "fast":
        return fast_attention(q, k, v, mask, queries_at_slots)
    return reference_attention(q, k, v, mask.dense)
