"""Group-relative advantage estimators against a separate NumPy reference, masks included."""

from __future__ import annotations

import jax
import numpy as np
import pytest

from jaxrl.training.advantages import (
    ADVANTAGE_ESTIMATORS,
    AdvantageConfig,
    compute_advantages,
    get_advantage_estimator,
)

EPS = 1e-6


def reference(rewards: np.ndarray, mask: np.ndarray, estimator: str, scale: str) -> np.ndarray:
    """Loop-by-loop NumPy version of the documented formulas."""
    out = np.zeros(rewards.shape, dtype=np.float64)
    all_usable = rewards[mask].astype(np.float64)
    batch_std = np.std(all_usable, ddof=1) if all_usable.size > 1 else 0.0
    for g in range(rewards.shape[0]):
        idx = [i for i in range(rewards.shape[1]) if mask[g, i]]
        if len(idx) < 2:
            continue
        vals = rewards[g, idx].astype(np.float64)
        for k, i in enumerate(idx):
            if estimator == "rloo":
                centered = vals[k] - np.mean(np.delete(vals, k))
            else:
                centered = vals[k] - np.mean(vals)
            if scale == "group":
                centered /= np.std(vals, ddof=1) + EPS
            elif scale == "batch":
                centered /= batch_std + EPS
            out[g, i] = centered
    return out


# Groups: mixed binary; all equal; one infra-failed sample holding NaN; a single usable sample;
# nothing usable; speedup-like rewards.
REWARDS = np.array(
    [
        [1.0, 0.0, 1.0, 0.0],
        [2.0, 2.0, 2.0, 2.0],
        [1.0, np.nan, 0.0, 0.5],
        [1.0, 0.0, 1.0, 1.0],
        [0.0, 1.0, 0.0, 0.0],
        [1.9, 0.0, 1.2, 0.7],
    ],
    dtype=np.float32,
)
MASK = np.array(
    [
        [True, True, True, True],
        [True, True, True, True],
        [True, False, True, True],
        [True, False, False, False],
        [False, False, False, False],
        [True, True, True, True],
    ]
)

CASES = [
    ("grpo", "group"), ("grpo", "batch"), ("grpo", "none"),
    ("drgrpo", "none"),
    ("rloo", "none"), ("rloo", "group"), ("rloo", "batch"),
]


@pytest.mark.parametrize("estimator, scale", CASES)
def test_matches_numpy_reference(estimator, scale):
    got = np.asarray(compute_advantages(REWARDS, MASK, AdvantageConfig(estimator, scale)))
    assert got.dtype == np.float32 and got.shape == REWARDS.shape
    assert np.isfinite(got).all()
    np.testing.assert_allclose(got, reference(REWARDS, MASK, estimator, scale), rtol=1e-5, atol=1e-6)


def test_hand_computed_values():
    # Group [1, 0, 1, 0]: mean 0.5, sample std sqrt(1/3); GRPO gives +-0.5 / 0.57735 = +-0.866.
    grpo = np.asarray(compute_advantages(REWARDS[:1], MASK[:1], AdvantageConfig("grpo")))
    np.testing.assert_allclose(grpo, [[0.866025, -0.866025, 0.866025, -0.866025]], rtol=1e-5)
    # RLOO on [1, 0, 0]: each reward minus the mean of the other two.
    rloo = np.asarray(compute_advantages(np.array([[1.0, 0.0, 0.0]]), np.ones((1, 3), bool), AdvantageConfig("rloo")))
    np.testing.assert_allclose(rloo, [[1.0, -0.5, -0.5]], rtol=1e-6)
    drgrpo = np.asarray(compute_advantages(np.array([[3.0, 1.0]]), np.ones((1, 2), bool), AdvantageConfig("drgrpo")))
    np.testing.assert_allclose(drgrpo, [[1.0, -1.0]])


@pytest.mark.parametrize("estimator", sorted(ADVANTAGE_ESTIMATORS))
def test_masked_samples_get_zero_and_do_not_move_the_others(estimator):
    config = AdvantageConfig(estimator)
    base = np.asarray(compute_advantages(REWARDS, MASK, config))
    assert base[~MASK].tolist() == [0.0] * int((~MASK).sum())
    assert (base[1] == 0).all() and (base[3] == 0).all() and (base[4] == 0).all()  # equal / <2 usable / none
    changed = np.where(MASK, REWARDS, 123.0).astype(np.float32)
    np.testing.assert_array_equal(np.asarray(compute_advantages(changed, MASK, config)), base)
    # Masking a sample is not the same as scoring it zero.
    zeroed = np.asarray(compute_advantages(np.nan_to_num(REWARDS), np.ones_like(MASK), config))
    assert not np.allclose(zeroed[2], base[2])


def test_defaults_and_jit():
    assert AdvantageConfig("grpo").resolved_scale == "group"
    assert AdvantageConfig("drgrpo").resolved_scale == "none"
    assert AdvantageConfig("rloo").resolved_scale == "none"
    config = AdvantageConfig("grpo", "batch")
    jitted = jax.jit(compute_advantages, static_argnums=2)(REWARDS, MASK, config)
    np.testing.assert_allclose(np.asarray(jitted), reference(REWARDS, MASK, "grpo", "batch"), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"estimator": "gae"}, "unknown advantage estimator"),
        ({"estimator": "drgrpo", "scale_rewards": "group"}, "not allowed"),
        ({"estimator": "grpo", "scale_rewards": "seq"}, "not allowed"),
        ({"epsilon": 0.0}, "epsilon"),
    ],
)
def test_bad_config_is_rejected(kwargs, message):
    with pytest.raises(ValueError, match=message):
        AdvantageConfig(**kwargs)


def test_shapes_are_checked():
    with pytest.raises(ValueError, match="num_groups"):
        compute_advantages(REWARDS.reshape(-1), MASK.reshape(-1), AdvantageConfig())
    with pytest.raises(ValueError, match="unknown"):
        get_advantage_estimator("ppo")
