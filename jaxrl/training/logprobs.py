"""Log-probabilities of given next tokens under the policy, with the vocabulary projection chunked.

The float32 logits of a whole row ([B, T, V]: 10 GB for one 16k-token row of Qwen3's 152k
vocabulary) need not exist at once: with `chunk` > 0 the final hidden states are projected and
reduced `chunk` positions at a time, and each chunk is rematerialised in the backward pass, so the
peak is one chunk's logits. Used by the SFT loss and by GRPO (policy and reference log-probs).

`token_logprobs_and_entropy` also returns the entropy of each next-token distribution, from the same
chunk of logits (no second projection). It is a metric (GRPO logs it to watch for entropy collapse),
so it carries no gradient: the backward pass of the log-probs is unchanged by asking for it.

`one_sequence_per_row` is the caller's promise that each row holds one sequence from slot 0 followed
by padding (GRPO rows, unpacked rows); it lets cuDNN attention drop the dense mask (models/attention.py).

`temperature` divides the logits before the softmax, as the sampler does: GRPO samples from
softmax(logits / T), so its old and new logprobs (and the entropy it reports) must be those of that
distribution, or any T other than 1 trains a policy other than the one that was sampled.
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
    one_sequence_per_row: bool = False,
    temperature: float = 1.0,
) -> jax.Array:
    """float32 [B, T]: log p(targets[b, t] | tokens of the same segment up to t) under softmax(logits /
    temperature); chunk 0 = no chunking."""
    return _chunked(model, tokens, positions, segment_ids, targets, chunk, False, one_sequence_per_row,
                    temperature)[0]


def token_logprobs_and_entropy(
    model: Transformer,
    tokens: jax.Array,
    positions: jax.Array,
    segment_ids: jax.Array,
    targets: jax.Array,
    chunk: int = 0,
    one_sequence_per_row: bool = False,
    temperature: float = 1.0,
) -> tuple[jax.Array, jax.Array]:
    """float32 ([B, T] log-probs as `token_logprobs`, [B, T] entropy -sum_v p_v log p_v of the policy's
    next-token distribution at each position, under stop_gradient), both at `temperature`."""
    logp, entropy = _chunked(model, tokens, positions, segment_ids, targets, chunk, True, one_sequence_per_row,
                             temperature)
    return logp, entropy


def _chunked(
    model: Transformer,
    tokens: jax.Array,
    positions: jax.Array,
    segment_ids: jax.Array,
    targets: jax.Array,
    chunk: int,
    with_entropy: bool,
    one_sequence_per_row: bool,
    temperature: float = 1.0,
) -> tuple[jax.Array, ...]:
    if not temperature > 0:
        raise ValueError(f"temperature must be > 0 (greedy decoding has no logprobs to train), got {temperature!r}")
    hidden, _ = model.hidden_states(tokens, positions, segment_ids=segment_ids,
                                    one_sequence_per_row=one_sequence_per_row)
    batch, time, width = hidden.shape
    if targets.shape != (batch, time):
        raise ValueError(f"targets must be {(batch, time)}, got {targets.shape}")

    def reduce_chunk(h: jax.Array, y: jax.Array) -> tuple[jax.Array, ...]:
        logits = model.logits(h)
        if temperature != 1.0:
            logits = logits.astype(jnp.float32) / temperature
        lse = jax.nn.logsumexp(logits, axis=-1)
        picked = jnp.take_along_axis(logits, y[..., None].astype(jnp.int32), axis=-1)[..., 0]
        if not with_entropy:
            return (picked - lse,)
        z = jax.lax.stop_gradient(logits)
        z_lse = jax.lax.stop_gradient(lse)
        # H = -sum p log p with log p = z - lse; p underflowing to 0 contributes exactly 0.
        entropy = -jnp.sum(jnp.exp(z - z_lse[..., None]) * (z - z_lse[..., None]), axis=-1)
        return picked - lse, entropy

    if chunk <= 0 or chunk >= time:
        return reduce_chunk(hidden, targets)
    if time % chunk:
        raise ValueError(f"chunk {chunk} must divide the sequence length {time}")
    n = time // chunk
    hs = hidden.reshape(batch, n, chunk, width).swapaxes(0, 1)
    ys = targets.reshape(batch, n, chunk).swapaxes(0, 1)
    outs = jax.lax.map(jax.checkpoint(lambda hy: reduce_chunk(*hy)), (hs, ys))
    return tuple(out.swapaxes(0, 1).reshape(batch, time) for out in outs)
