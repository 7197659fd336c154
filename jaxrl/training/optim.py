"""The optimizer shared by SFT and GRPO: AdamW with warmup + decay and global-norm clipping.

`make_optimizer(spec, total_steps)` turns an `OptimSection` (jaxrl.config.schema) into an optax
transformation and its learning-rate schedule (the schedule is returned so trainers can log the rate
of each step). Clipping comes first, on the mean gradient of the whole batch; weight decay is
decoupled (AdamW) and skips 1-D parameters (norm scales); both moments are float32 whatever the
parameter dtype, so bf16 parameters still get a float32 optimizer state.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import optax

from jaxrl.config.schema import OptimSection


def make_schedule(spec: OptimSection, total_steps: int) -> optax.Schedule:
    """Learning rate per step: 0 -> peak over round(warmup_ratio x total) steps, then the decay.

    The decay reaches min_lr_ratio x peak at step `total_steps` (the step after the last update).
    """
    if total_steps < 1:
        raise ValueError(f"total_steps must be >= 1, got {total_steps}")
    peak = spec.learning_rate
    warmup = int(round(spec.warmup_ratio * total_steps))
    decay_steps = max(total_steps - warmup, 1)
    end = peak * spec.min_lr_ratio
    if spec.decay == "cosine":
        decay = optax.cosine_decay_schedule(peak, decay_steps, alpha=spec.min_lr_ratio)
    elif spec.decay == "linear":
        decay = optax.linear_schedule(peak, end, decay_steps)
    elif spec.decay == "constant":
        decay = optax.constant_schedule(peak)
    else:
        raise ValueError(f"unknown decay {spec.decay!r}")
    if warmup == 0:
        return decay
    return optax.join_schedules([optax.linear_schedule(0.0, peak, warmup), decay], [warmup])


def decay_mask(params: Any) -> Any:
    """True for the parameters that get weight decay: matrices and embeddings, not norm scales."""
    return jax.tree.map(lambda p: jnp.ndim(p) > 1, params)


def make_optimizer(spec: OptimSection, total_steps: int) -> tuple[optax.GradientTransformation, optax.Schedule]:
    """(optimizer, schedule) for `total_steps` optimizer updates."""
    schedule = make_schedule(spec, total_steps)
    adamw = optax.adamw(
        schedule, b1=spec.b1, b2=spec.b2, eps=spec.eps, weight_decay=spec.weight_decay, mask=decay_mask
    )
    parts = [optax.clip_by_global_norm(spec.max_grad_norm)] if spec.max_grad_norm > 0 else []
    return optax.chain(*parts, in_float32(adamw)), schedule


def in_float32(inner: optax.GradientTransformation) -> optax.GradientTransformation:
    """`inner` run on float32 copies of the updates and parameters, so its state (e.g. both Adam
    moments, which optax creates in the parameter dtype) is float32; the updates come out float32
    and `optax.apply_updates` casts each back to its parameter's dtype."""

    def f32(tree: Any) -> Any:
        return jax.tree.map(lambda x: jnp.asarray(x, jnp.float32), tree)

    def init(params):
        return inner.init(f32(params))

    def update(updates, state, params=None):
        return inner.update(f32(updates), state, None if params is None else f32(params))

    return optax.GradientTransformation(init, update)
