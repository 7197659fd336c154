"""From next-token logits to sampled tokens and their log-probabilities (inside jit, one key per row).

Order as in transformers and vLLM: divide by the temperature, keep the top-k logits, then the top-p
nucleus of what is left, and draw by Gumbel-max. Which of these run is static (`mode`), their values
are traced (`SamplingArgs`), so changing the temperature or p never recompiles.

Reported log-probability (what GRPO uses as the old-policy logprob): log softmax(logits / T) at the
drawn token, i.e. the temperature-T policy *before* top-k / top-p truncation. Truncation only limits
which tokens can be drawn; a trainer that recomputes log softmax(logits / T) over the same tokens gets
the same numbers. Greedy decoding (T = 0) reports log softmax(logits), the T = 1 policy.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp

GREEDY, SAMPLE, FILTERED = "greedy", "sample", "filtered"
MODES = (GREEDY, SAMPLE, FILTERED)


def mode_for(temperature: float, top_k: int, top_p: float) -> str:
    """The static sampling mode: greedy at T = 0, filtered when top-k or top-p is on, else plain sampling."""
    if temperature == 0:
        return GREEDY
    return FILTERED if top_k > 0 or top_p < 1.0 else SAMPLE


@jax.tree_util.register_dataclass
@dataclasses.dataclass
class SamplingArgs:
    """The traced sampling knobs (float32 / int32 scalars); 0 turns top_k off, 1.0 turns top_p off."""

    temperature: jax.Array
    top_k: jax.Array
    top_p: jax.Array

    @classmethod
    def of(cls, temperature: float, top_k: int, top_p: float) -> SamplingArgs:
        return cls(jnp.float32(temperature), jnp.int32(top_k), jnp.float32(top_p))


def filter_logits(scaled: jax.Array, top_k: jax.Array, top_p: jax.Array) -> jax.Array:
    """`scaled` [B, V] with every logit outside the top-k, then outside the top-p nucleus, set to -inf.

    The nucleus is the smallest set of highest logits whose probability reaches p (the top logit is
    always kept). Logits tied with the last kept one are kept too, so ties can exceed k.
    """
    vocab = scaled.shape[-1]
    ranks = jnp.arange(vocab)
    k = jnp.where(top_k > 0, jnp.minimum(top_k, vocab), vocab)
    ordered = -jnp.sort(-scaled, axis=-1)
    in_top_k = ranks < k
    probs = jax.nn.softmax(jnp.where(in_top_k, ordered, -jnp.inf), axis=-1)
    mass_before = jnp.cumsum(probs, axis=-1) - probs
    keep = in_top_k & ((mass_before < top_p) | (top_p >= 1.0))
    threshold = jnp.min(jnp.where(keep, ordered, jnp.inf), axis=-1, keepdims=True)
    return jnp.where(scaled >= threshold, scaled, -jnp.inf)


def draw(logits: jax.Array, keys: jax.Array, args: SamplingArgs, mode: str) -> tuple[jax.Array, jax.Array]:
    """Tokens [B] int32 and their logprobs [B] float32 from float32 logits [B, V] and typed keys [B]."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    logits = logits.astype(jnp.float32)
    if mode == GREEDY:
        tokens = jnp.argmax(logits, axis=-1)
        logprobs = jax.nn.log_softmax(logits, axis=-1)
    else:
        scaled = logits / args.temperature
        logprobs = jax.nn.log_softmax(scaled, axis=-1)
        candidates = filter_logits(scaled, args.top_k, args.top_p) if mode == FILTERED else scaled
        gumbel = jax.vmap(lambda key: jax.random.gumbel(key, scaled.shape[-1:], jnp.float32))(keys)
        tokens = jnp.argmax(candidates + gumbel, axis=-1)
    tokens = tokens.astype(jnp.int32)
    return tokens, jnp.take_along_axis(logprobs, tokens[:, None], axis=-1)[:, 0]
