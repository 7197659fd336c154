"""Group-relative advantage estimators, picked by name (`grpo`, `drgrpo`, `rloo`).

Every estimator maps rewards [num_groups, G] and a usable mask [num_groups, G] (False = the evaluation
failed for infrastructure reasons) to one advantage per sample, same shape, float32:

    grpo    A_i = (r_i - mean_g) / (scale + epsilon)      scale per `scale_rewards` (default `group`)
    drgrpo  A_i =  r_i - mean_g                           (Dr. GRPO: never divides by a std)
    rloo    A_i =  r_i - mean_{j != i} r_j = n/(n-1) (r_i - mean_g)    (default no scaling)

Statistics use only usable samples: mean_g is the mean of the n usable rewards of group g, and a std is
the sample std with Bessel's correction (ddof = 1, as `torch.std` in verl and TRL). Masked samples get
advantage 0 and their reward values (even NaN) never reach the arithmetic. A group with fewer than two
usable samples has no baseline and gets advantage 0 throughout.

`scale_rewards` (TRL's knob): `group` divides by the group's std, `batch` by the std of all usable rewards
in the batch, `none` does not divide. `None` picks the estimator's default (grpo: group, drgrpo and rloo:
none); drgrpo refuses any scaling, since not scaling is its definition. epsilon (1e-6, verl's value) keeps
a group whose rewards are all equal at advantage 0 instead of 0/0.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import jax
import jax.numpy as jnp

from jaxrl.config.schema import GRPOSection, default_of

SCALE_REWARDS = ("group", "batch", "none")

# (rewards, mask, scale_rewards, epsilon) -> advantages; scale_rewards is already resolved (never None).
AdvantageFn = Callable[[jax.Array, jax.Array, str, float], jax.Array]

ADVANTAGE_ESTIMATORS: dict[str, AdvantageFn] = {}
_DEFAULT_SCALE: dict[str, str] = {}
_ALLOWED_SCALE: dict[str, tuple[str, ...]] = {}


def register_advantage_estimator(
    name: str, default_scale: str, allowed_scales: tuple[str, ...] = SCALE_REWARDS
) -> Callable[[AdvantageFn], AdvantageFn]:
    """Add an estimator under `name` with its default and permitted `scale_rewards`."""

    def register(fn: AdvantageFn) -> AdvantageFn:
        if name in ADVANTAGE_ESTIMATORS:
            raise ValueError(f"advantage estimator {name!r} is already registered")
        if default_scale not in allowed_scales or not set(allowed_scales) <= set(SCALE_REWARDS):
            raise ValueError(f"bad scale_rewards for {name!r}: default {default_scale!r}, allowed {allowed_scales}")
        ADVANTAGE_ESTIMATORS[name] = fn
        _DEFAULT_SCALE[name] = default_scale
        _ALLOWED_SCALE[name] = allowed_scales
        return fn

    return register


def get_advantage_estimator(name: str) -> AdvantageFn:
    if name not in ADVANTAGE_ESTIMATORS:
        raise ValueError(f"unknown advantage estimator {name!r}; known: {sorted(ADVANTAGE_ESTIMATORS)}")
    return ADVANTAGE_ESTIMATORS[name]


@dataclasses.dataclass(frozen=True)
class AdvantageConfig:
    """estimator: a registry name; scale_rewards: group/batch/none or None for the estimator's default."""

    estimator: str = default_of(GRPOSection, "advantage_estimator")
    scale_rewards: str | None = default_of(GRPOSection, "scale_rewards")
    epsilon: float = 1e-6

    def __post_init__(self) -> None:
        get_advantage_estimator(self.estimator)
        if self.scale_rewards is not None and self.scale_rewards not in _ALLOWED_SCALE[self.estimator]:
            raise ValueError(
                f"scale_rewards={self.scale_rewards!r} is not allowed for {self.estimator!r}; "
                f"allowed: {list(_ALLOWED_SCALE[self.estimator])}"
            )
        if not self.epsilon > 0:
            raise ValueError(f"epsilon must be positive, got {self.epsilon!r}")

    @property
    def resolved_scale(self) -> str:
        return self.scale_rewards if self.scale_rewards is not None else _DEFAULT_SCALE[self.estimator]


def compute_advantages(rewards: jax.Array, mask: jax.Array, config: AdvantageConfig) -> jax.Array:
    """Advantages [num_groups, G] for rewards [num_groups, G] under `config` (jit-friendly)."""
    rewards = jnp.asarray(rewards)
    mask = jnp.asarray(mask)
    if rewards.ndim != 2 or rewards.shape != mask.shape:
        raise ValueError(f"rewards and mask must both be [num_groups, G]; got {rewards.shape} and {mask.shape}")
    return get_advantage_estimator(config.estimator)(rewards, mask, config.resolved_scale, config.epsilon)


def _group_stats(rewards: jax.Array, mask: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array, jax.Array]:
    """(rewards with masked entries zeroed, float mask, usable count per group [g,1], group mean [g,1])."""
    m = mask.astype(jnp.float32)
    r = jnp.where(mask, rewards.astype(jnp.float32), 0.0)
    n = m.sum(axis=1, keepdims=True)
    mean = r.sum(axis=1, keepdims=True) / jnp.maximum(n, 1.0)
    return r, m, n, mean


def _sample_std(values: jax.Array, m: jax.Array, mean: jax.Array, axis: int | None) -> jax.Array:
    n = m.sum(axis=axis, keepdims=axis is not None)
    var = (m * (values - mean) ** 2).sum(axis=axis, keepdims=axis is not None) / jnp.maximum(n - 1.0, 1.0)
    return jnp.sqrt(var)


def _scale(centered: jax.Array, r: jax.Array, m: jax.Array, mean: jax.Array, scale: str, epsilon: float) -> jax.Array:
    if scale == "none":
        return centered
    if scale == "group":
        std = _sample_std(r, m, mean, axis=1)
    else:  # batch: the std of every usable reward in the batch, around the batch mean
        batch_mean = r.sum() / jnp.maximum(m.sum(), 1.0)
        std = _sample_std(r, m, batch_mean, axis=None)
    return centered / (std + epsilon)


def _finish(advantages: jax.Array, mask: jax.Array, n: jax.Array) -> jax.Array:
    """Zero the masked samples and every group with fewer than two usable samples."""
    return jnp.where(mask & (n >= 2), advantages, 0.0)


@register_advantage_estimator("grpo", default_scale="group")
def grpo_advantages(rewards: jax.Array, mask: jax.Array, scale: str, epsilon: float) -> jax.Array:
    r, m, n, mean = _group_stats(rewards, mask)
    return _finish(_scale(r - mean, r, m, mean, scale, epsilon), mask, n)


@register_advantage_estimator("drgrpo", default_scale="none", allowed_scales=("none",))
def drgrpo_advantages(rewards: jax.Array, mask: jax.Array, scale: str, epsilon: float) -> jax.Array:
    del scale, epsilon  # Dr. GRPO is the unscaled group-mean baseline by definition.
    r, _, n, mean = _group_stats(rewards, mask)
    return _finish(r - mean, mask, n)


@register_advantage_estimator("rloo", default_scale="none")
def rloo_advantages(rewards: jax.Array, mask: jax.Array, scale: str, epsilon: float) -> jax.Array:
    r, m, n, mean = _group_stats(rewards, mask)
    # r_i minus the mean of the other n-1 usable rewards: (n r_i - sum) / (n - 1) = n/(n-1) (r_i - mean).
    loo = (r - mean) * n / jnp.maximum(n - 1.0, 1.0)
    return _finish(_scale(loo, r, m, mean, scale, epsilon), mask, n)
