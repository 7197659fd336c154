"""Log-probabilities of given next tokens under the policy, with the vocabulary projection chunked.

The float32 logits of a whole row ([B, T, V]: 10 GB for one 16k-token row of Qwen3's 152k
vocabulary) need not exist at once: with `chunk` > 0 the final hidden states are projected and
reduced `chunk` positions at a time, and each chunk is rematerialised in the backward pass, so the
peak is one chunk's logits. Used by the SFT loss and by GRPO (policy and reference log-probs).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from jaxrl.models.transformer import Transformer


def token_logprobs(
    model: Transformer,
    tokens: jax.Array,
    positions: jax.Array,
    segment_ids: jax.Array,
    targets: jax.Array,
    chunk: int = 0,
) -> jax.Array:
    """float32 [B, T]: log p(targets[b, t] | tokens of the same segment up to t); chunk 0 = no chunking."""
    hidden, _ = model.hidden_states(tokens, positions, segment_ids=segment_ids)
    batch, time, width = hidden.shape
    if targets.shape != (batch, time):
        raise ValueError(f"targets must be {(batch, time)}, got {targets.shape}")

    def chunk_logprobs(h: jax.Array, y: jax.Array) -> jax.Array:
        logits = model.logits(h)
        picked = jnp.take_along_axis(logits, y[..., None].astype(jnp.int32), axis=-1)[..., 0]
        return picked - jax.nn.logsumexp(logits, axis=-1)

    if chunk <= 0 or chunk >= time:
        return chunk_logprobs(hidden, targets)
    if time % chunk:
        raise ValueError(f"chunk {chunk} must divide the sequence length {time}")
    n = time // chunk
    hs = hidden.reshape(batch, n, chunk, width).swapaxes(0, 1)
    ys = targets.reshape(batch, n, chunk).swapaxes(0, 1)
    out = jax.lax.map(jax.checkpoint(lambda hy: chunk_logprobs(*hy)), (hs, ys))
    return out.swapaxes(0, 1).reshape(batch, time)
