"""The GRPO policy loss: PPO-clipped ratio, optional KL to a frozen reference, aggregation by name.

Per token t of sequence b (all arithmetic in float32, masked tokens contribute nothing):

    ratio = exp(logp - logp_old)                               logp_old: the sampling policy's logprobs
    pg    = max(-A ratio, -A clip(ratio, 1 - epsilon_low, 1 + epsilon_high))
    loss  = pg + beta x KL_est(logp, logp_ref)                 KL term only when beta > 0

KL estimators of KL(pi_theta || pi_ref) from samples of the policy (Schulman, "Approximating KL
divergence"), with d = logp_ref - logp:
    k1 = -d          unbiased, high variance, can be negative
    k2 = d^2 / 2     biased, low variance
    k3 = exp(d) - d - 1   unbiased, low variance, never negative (TRL's and verl's low_var_kl choice)

Aggregation (`loss_agg_mode`, verl's names) returns an unreduced numerator and a denominator, never
their quotient, so that summing both over micro-batches or data-parallel shards and dividing once gives
exactly the full-batch loss. Sequences are never split across micro-batches. With m the token mask and
n_b = sum_t m_bt the tokens of sequence b, and S = #{b : n_b > 0} (a fully masked sequence, such as an
infrastructure failure, is not counted):
    token-mean               numerator sum_bt m l               denominator sum_bt m
    seq-mean-token-mean      numerator sum_b (sum_t m l) / n_b  denominator S
    seq-mean-token-sum-norm  numerator sum_bt m l / L           denominator S,  L = max_completion_length
The last is Dr. GRPO's constant normaliser: every sequence is divided by the same L, not by its length.
The denominator does not depend on the parameters: differentiate the numerator, sum its gradients, then
divide by the summed denominator.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp

from jaxrl.config.schema import GRPOSection, check_bounds, default_of

# (logprobs, ref_logprobs) -> per-token estimate of KL(pi_theta || pi_ref).
KLFn = Callable[[jax.Array, jax.Array], jax.Array]
KL_ESTIMATORS: dict[str, KLFn] = {}

# (per-token loss [B, T], float mask [B, T], config) -> (numerator, denominator), both scalars.
AggregationFn = Callable[[jax.Array, jax.Array, "LossConfig"], tuple[jax.Array, jax.Array]]
LOSS_AGGREGATIONS: dict[str, AggregationFn] = {}


def _registrar(table: dict, kind: str, name: str) -> Callable:
    def register(fn):
        if name in table:
            raise ValueError(f"{kind} {name!r} is already registered")
        table[name] = fn
        return fn

    return register


def _lookup(table: dict, kind: str, name: str):
    if name not in table:
        raise ValueError(f"unknown {kind} {name!r}; known: {sorted(table)}")
    return table[name]


def register_kl_estimator(name: str) -> Callable[[KLFn], KLFn]:
    return _registrar(KL_ESTIMATORS, "KL estimator", name)


def get_kl_estimator(name: str) -> KLFn:
    return _lookup(KL_ESTIMATORS, "KL estimator", name)


def register_loss_aggregation(name: str) -> Callable[[AggregationFn], AggregationFn]:
    return _registrar(LOSS_AGGREGATIONS, "loss_agg_mode", name)


def get_loss_aggregation(name: str) -> AggregationFn:
    return _lookup(LOSS_AGGREGATIONS, "loss_agg_mode", name)


@dataclasses.dataclass(frozen=True)
class LossConfig:
    """Clip range, KL weight and estimator, aggregation; hashable, so it can be a static jit argument.

    beta = 0 (the default) turns the KL term off; max_completion_length is required by (and only used
    by) `seq-mean-token-sum-norm`.
    """

    epsilon_low: float = default_of(GRPOSection, "epsilon_low")
    epsilon_high: float = default_of(GRPOSection, "epsilon_high")
    beta: float = default_of(GRPOSection, "beta")
    kl_estimator: str = default_of(GRPOSection, "kl_estimator")
    loss_agg_mode: str = default_of(GRPOSection, "loss_agg_mode")
    max_completion_length: int | None = None

    def __post_init__(self) -> None:
        check_bounds(self, GRPOSection)  # epsilon_low, epsilon_high, beta: declared once, in the schema
        get_kl_estimator(self.kl_estimator)
        get_loss_aggregation(self.loss_agg_mode)
        if self.loss_agg_mode == "seq-mean-token-sum-norm" and not (
            isinstance(self.max_completion_length, int) and self.max_completion_length > 0
        ):
            raise ValueError(
                "loss_agg_mode 'seq-mean-token-sum-norm' needs max_completion_length (a positive int), "
                f"got {self.max_completion_length!r}"
            )


class LossOutput(NamedTuple):
    """numerator / denominator is the loss. metrics are token sums (plus `tokens`, the count) that add up
    across micro-batches like the loss; `summarize_metrics` turns the summed dict into per-token means."""

    numerator: jax.Array
    denominator: jax.Array
    metrics: dict[str, jax.Array]


@register_kl_estimator("k1")
def kl_k1(logprobs: jax.Array, ref_logprobs: jax.Array) -> jax.Array:
    return logprobs - ref_logprobs


@register_kl_estimator("k2")
def kl_k2(logprobs: jax.Array, ref_logprobs: jax.Array) -> jax.Array:
    return 0.5 * jnp.square(logprobs - ref_logprobs)


@register_kl_estimator("k3")
def kl_k3(logprobs: jax.Array, ref_logprobs: jax.Array) -> jax.Array:
    d = ref_logprobs - logprobs
    return jnp.exp(d) - d - 1.0


def _sequences(mask: jax.Array) -> tuple[jax.Array, jax.Array]:
    """(tokens per sequence [B], 1.0 for each sequence with at least one token [B])."""
    n = mask.sum(axis=1)
    return n, (n > 0).astype(jnp.float32)


@register_loss_aggregation("token-mean")
def agg_token_mean(per_token: jax.Array, mask: jax.Array, config: LossConfig) -> tuple[jax.Array, jax.Array]:
    del config
    return (per_token * mask).sum(), mask.sum()


@register_loss_aggregation("seq-mean-token-mean")
def agg_seq_mean_token_mean(per_token: jax.Array, mask: jax.Array, config: LossConfig) -> tuple[jax.Array, jax.Array]:
    del config
    n, present = _sequences(mask)
    return ((per_token * mask).sum(axis=1) / jnp.maximum(n, 1.0)).sum(), present.sum()


@register_loss_aggregation("seq-mean-token-sum-norm")
def agg_seq_mean_token_sum_norm(
    per_token: jax.Array, mask: jax.Array, config: LossConfig
) -> tuple[jax.Array, jax.Array]:
    _, present = _sequences(mask)
    return (per_token * mask).sum() / float(config.max_completion_length), present.sum()


def policy_loss(
    logprobs: jax.Array,
    old_logprobs: jax.Array,
    advantages: jax.Array,
    mask: jax.Array,
    config: LossConfig,
    ref_logprobs: jax.Array | None = None,
    entropy: jax.Array | None = None,
) -> LossOutput:
    """PPO-clip (+ KL) loss of completion tokens, all inputs [B, T].

    logprobs: the current policy's (differentiated); old_logprobs: the sampling policy's; advantages:
    per token (e.g. `hrd.token_advantages`); mask: True/1 for completion tokens that count (padding and
    infrastructure-failed samples 0); ref_logprobs: the frozen reference's, needed when beta > 0 and
    reported as `ref_kl` whenever given; entropy: optional per-token entropy, reported only.
    Values at masked positions are ignored, even inf or NaN, in the loss and in its gradient.
    """
    shape = jnp.shape(logprobs)
    named = {"old_logprobs": old_logprobs, "advantages": advantages, "mask": mask}
    named.update({k: v for k, v in (("ref_logprobs", ref_logprobs), ("entropy", entropy)) if v is not None})
    if len(shape) != 2 or any(jnp.shape(v) != shape for v in named.values()):
        shapes = {k: jnp.shape(v) for k, v in named.items()}
        raise ValueError(f"all inputs must be [B, T] like logprobs {shape}; got {shapes}")
    if config.beta > 0 and ref_logprobs is None:
        raise ValueError("beta > 0 needs ref_logprobs (the frozen reference policy's logprobs)")

    keep = jnp.asarray(mask).astype(bool)
    m = keep.astype(jnp.float32)

    def clean(x: jax.Array) -> jax.Array:
        # Zero masked positions before any arithmetic, so garbage there cannot turn into NaN gradients.
        return jnp.where(keep, jnp.asarray(x, jnp.float32), 0.0)

    logp = clean(logprobs)
    old = jax.lax.stop_gradient(clean(old_logprobs))
    adv = jax.lax.stop_gradient(clean(advantages))

    log_ratio = logp - old
    ratio = jnp.exp(log_ratio)
    clipped = jnp.clip(ratio, 1.0 - config.epsilon_low, 1.0 + config.epsilon_high)
    pg = jnp.maximum(-adv * ratio, -adv * clipped)
    per_token = pg

    def sums(x: jax.Array) -> jax.Array:
        return (x * m).sum()

    metrics = {
        "tokens": m.sum(),
        "pg_loss": sums(pg),
        "ratio": sums(jax.lax.stop_gradient(ratio)),
        "clip_low": sums(((ratio < 1.0 - config.epsilon_low) & (adv < 0)).astype(jnp.float32)),
        "clip_high": sums(((ratio > 1.0 + config.epsilon_high) & (adv > 0)).astype(jnp.float32)),
        # k3 estimate of KL(pi_old || pi_theta) on the sampled tokens: how far this update has moved.
        "approx_kl": sums(jax.lax.stop_gradient(ratio - 1.0 - log_ratio)),
    }
    if ref_logprobs is not None:
        kl = get_kl_estimator(config.kl_estimator)(logp, jax.lax.stop_gradient(clean(ref_logprobs)))
        metrics["ref_kl"] = sums(jax.lax.stop_gradient(kl))
        if config.beta > 0:
            per_token = per_token + config.beta * kl
    if entropy is not None:
        metrics["entropy"] = sums(jax.lax.stop_gradient(clean(entropy)))

    numerator, denominator = get_loss_aggregation(config.loss_agg_mode)(per_token, m, config)
    return LossOutput(numerator, jax.lax.stop_gradient(denominator), metrics)


def loss_value(numerator: jax.Array, denominator: jax.Array) -> jax.Array:
    """numerator / denominator, and 0 when nothing counted (every sample masked out)."""
    return numerator / jnp.maximum(denominator, jnp.finfo(jnp.float32).tiny)


def summarize_metrics(metrics: dict[str, jax.Array]) -> dict[str, jax.Array]:
    """Per-token means (clip_low/clip_high become fractions) of metrics summed over micro-batches."""
    tokens = jnp.maximum(metrics["tokens"], 1.0)
    return {k: (v if k == "tokens" else v / tokens) for k, v in metrics.items()}
