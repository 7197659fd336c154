"""Learning-rate schedules, clipping, decoupled weight decay on matrices only, float32 optimizer state."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from jaxrl.config.schema import ConfigError, OptimSection
from jaxrl.training.optim import decay_mask, make_optimizer, make_schedule


def lrs(spec: OptimSection, total: int) -> np.ndarray:
    schedule = make_schedule(spec, total)
    return np.array([float(schedule(step)) for step in range(total + 1)])


def test_warmup_then_cosine_reaches_the_floor_at_the_last_step():
    spec = OptimSection(learning_rate=1.0, warmup_ratio=0.2, decay="cosine", min_lr_ratio=0.1)
    values = lrs(spec, 10)
    np.testing.assert_allclose(values[:3], [0.0, 0.5, 1.0])  # 2 warmup steps from 0
    np.testing.assert_allclose(values[6], 0.1 + 0.9 * 0.5 * (1 + np.cos(np.pi * 4 / 8)), rtol=1e-6)
    np.testing.assert_allclose(values[10], 0.1, rtol=1e-6)
    assert np.all(np.diff(values[2:]) <= 1e-9)


def test_linear_and_constant_decay():
    np.testing.assert_allclose(lrs(OptimSection(learning_rate=2.0, decay="linear"), 4), [2.0, 1.5, 1.0, 0.5, 0.0])
    np.testing.assert_allclose(lrs(OptimSection(learning_rate=2.0, decay="constant"), 3), [2.0] * 4)
    with pytest.raises(ValueError, match="total_steps"):
        make_schedule(OptimSection(), 0)


def test_bad_optimizer_settings_are_config_errors():
    with pytest.raises(ConfigError, match="learning_rate"):
        OptimSection(learning_rate=0.0)
    with pytest.raises(ConfigError, match="warmup_ratio"):
        OptimSection(warmup_ratio=1.0)
    with pytest.raises(ConfigError, match="decay"):
        OptimSection(decay="step")


def params():
    return {"kernel": jnp.ones((2, 3)), "scale": jnp.ones((3,))}


def test_weight_decay_applies_to_matrices_only():
    assert decay_mask(params()) == {"kernel": True, "scale": False}
    spec = OptimSection(learning_rate=0.1, weight_decay=0.5, max_grad_norm=0.0, decay="constant")
    optimizer, _ = make_optimizer(spec, 10)
    p = params()
    zero = jax.tree.map(jnp.zeros_like, p)
    updates, _ = optimizer.update(zero, optimizer.init(p), p)
    new = optax.apply_updates(p, updates)
    np.testing.assert_allclose(new["kernel"], 1.0 - 0.1 * 0.5)  # decoupled: lr * wd * param
    np.testing.assert_allclose(new["scale"], 1.0)


def test_gradients_are_clipped_to_the_global_norm_before_adam():
    grads = {"kernel": jnp.full((2, 3), 30.0), "scale": jnp.full((3,), -40.0)}
    norm = np.sqrt(6 * 30.0**2 + 3 * 40.0**2)
    for max_norm, expected_scale in ((1.0, 1.0 / norm), (0.0, 1.0), (1e6, 1.0)):
        spec = OptimSection(learning_rate=1.0, max_grad_norm=max_norm, b1=0.9)
        optimizer, _ = make_optimizer(spec, 10)
        p = params()
        _, state = optimizer.update(grads, optimizer.init(p), p)
        # Adam's first moment after one step is (1 - b1) x the gradient it was given.
        mu = optax.tree_utils.tree_get(state, "mu")
        np.testing.assert_allclose(mu["kernel"], 0.1 * 30.0 * expected_scale, rtol=1e-5)
        np.testing.assert_allclose(mu["scale"], 0.1 * -40.0 * expected_scale, rtol=1e-5)


def test_optimizer_state_is_float32_for_bfloat16_parameters():
    optimizer, _ = make_optimizer(OptimSection(weight_decay=0.01), 10)
    p = jax.tree.map(lambda x: x.astype(jnp.bfloat16), params())
    state = optimizer.init(p)
    float_leaves = [x for x in jax.tree.leaves(state) if jnp.issubdtype(x.dtype, jnp.floating)]
    assert float_leaves and all(x.dtype == jnp.float32 for x in float_leaves)
    grads = jax.tree.map(lambda x: jnp.full(x.shape, 0.5, jnp.bfloat16), p)
    updates, new_state = optimizer.update(grads, state, p)
    assert jax.tree.map(lambda x: x.dtype, new_state) == jax.tree.map(lambda x: x.dtype, state)
    assert all(x.dtype == jnp.bfloat16 for x in jax.tree.leaves(optax.apply_updates(p, updates)))
