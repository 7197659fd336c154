"""PPO-clip loss, KL estimators and aggregation modes against a separate NumPy reference."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxrl.training.losses import (
    KL_ESTIMATORS,
    LOSS_AGGREGATIONS,
    LossConfig,
    get_kl_estimator,
    loss_value,
    policy_loss,
    summarize_metrics,
)

MODES = ["token-mean", "seq-mean-token-mean", "seq-mean-token-sum-norm"]
KLS = ["k1", "k2", "k3"]
MAX_LEN = 10


def config(mode: str = "token-mean", **kwargs) -> LossConfig:
    return LossConfig(loss_agg_mode=mode, max_completion_length=MAX_LEN, epsilon_low=0.2, epsilon_high=0.28, **kwargs)


def make_batch(seed: int = 0, b: int = 6, t: int = 7) -> dict[str, np.ndarray]:
    """Sequences of different lengths, one fully masked (an infrastructure failure), ratios on both sides
    of the clip range, advantages of both signs."""
    rng = np.random.default_rng(seed)
    old = rng.uniform(-3.0, -0.1, (b, t)).astype(np.float32)
    new = (old + rng.uniform(-0.6, 0.6, (b, t))).astype(np.float32)
    ref = (old + rng.uniform(-0.5, 0.5, (b, t))).astype(np.float32)
    adv = np.repeat(rng.choice([-1.3, -0.4, 0.7, 1.1], size=(b, 1)), t, axis=1).astype(np.float32)
    lengths = [7, 3, 5, 0, 1, 6][:b]
    mask = np.array([[j < n for j in range(t)] for n in lengths])
    return {"logprobs": new, "old_logprobs": old, "advantages": adv, "mask": mask, "ref_logprobs": ref}


# ---------------------------------------------------------------- NumPy reference


def ref_kl(logp: float, ref: float, name: str) -> float:
    p, q = np.exp(np.float64(logp)), np.exp(np.float64(ref))
    if name == "k1":
        return np.log(p / q)
    if name == "k2":
        return 0.5 * np.log(p / q) ** 2
    return q / p - np.log(q / p) - 1.0


def ref_per_token(batch, cfg: LossConfig) -> np.ndarray:
    b, t = batch["logprobs"].shape
    out = np.zeros((b, t))
    for i in range(b):
        for j in range(t):
            ratio = np.exp(np.float64(batch["logprobs"][i, j]) - batch["old_logprobs"][i, j])
            a = batch["advantages"][i, j]
            clipped = min(max(ratio, 1 - cfg.epsilon_low), 1 + cfg.epsilon_high)
            out[i, j] = max(-a * ratio, -a * clipped)
            if cfg.beta > 0:
                out[i, j] += cfg.beta * ref_kl(batch["logprobs"][i, j], batch["ref_logprobs"][i, j], cfg.kl_estimator)
    return out


def ref_aggregate(per_token: np.ndarray, mask: np.ndarray, cfg: LossConfig) -> tuple[float, float]:
    num, den = 0.0, 0.0
    for i in range(per_token.shape[0]):
        tokens = [per_token[i, j] for j in range(per_token.shape[1]) if mask[i, j]]
        if cfg.loss_agg_mode == "token-mean":
            num, den = num + sum(tokens), den + len(tokens)
        elif tokens and cfg.loss_agg_mode == "seq-mean-token-mean":
            num, den = num + sum(tokens) / len(tokens), den + 1
        elif tokens:  # seq-mean-token-sum-norm
            num, den = num + sum(tokens) / cfg.max_completion_length, den + 1
    return num, den


def run(batch, cfg, **overrides):
    args = {**batch, **overrides}
    return policy_loss(
        args["logprobs"], args["old_logprobs"], args["advantages"], args["mask"], cfg,
        ref_logprobs=args.get("ref_logprobs"),
    )


# ---------------------------------------------------------------- tests


def test_hand_computed_clipping():
    cfg = LossConfig(epsilon_low=0.2, epsilon_high=0.2)
    logp = jnp.log(jnp.array([[1.5, 0.5, 1.1, 0.5]]))
    adv = jnp.array([[1.0, -1.0, 1.0, 1.0]])
    out = policy_loss(logp, jnp.zeros((1, 4)), adv, jnp.ones((1, 4), bool), cfg)
    # A>0, ratio 1.5 -> capped at 1.2; A<0, ratio 0.5 -> floored at 0.8; inside the range: -A ratio;
    # A>0 with a small ratio is not clipped (the pessimistic bound is the unclipped term).
    np.testing.assert_allclose(float(out.numerator), -1.2 + 0.8 - 1.1 - 0.5, rtol=1e-6)
    assert float(out.metrics["clip_high"]) == 1.0 and float(out.metrics["clip_low"]) == 1.0


def test_asymmetric_clipping_lets_good_tokens_rise_further_than_bad_ones_fall():
    """DAPO's clip-higher (epsilon_low 0.2, epsilon_high 0.28): a positive-advantage token at ratio 1.25 is
    inside the range and keeps its gradient, where the symmetric range clips it; a negative-advantage token
    at ratio 0.75 is clipped by both (its gradient is zero)."""
    logp = jnp.log(jnp.array([[1.25, 0.75]]))
    adv = jnp.array([[1.0, -1.0]])
    mask = jnp.ones((1, 2), bool)

    def grads(cfg):
        return jax.grad(lambda lp: policy_loss(lp, jnp.zeros((1, 2)), adv, mask, cfg).numerator)(logp)

    asym, sym = LossConfig(epsilon_low=0.2, epsilon_high=0.28), LossConfig(epsilon_low=0.2, epsilon_high=0.2)
    np.testing.assert_allclose(np.asarray(grads(asym)), [[-1.25, 0.0]], rtol=1e-6)
    np.testing.assert_allclose(np.asarray(grads(sym)), [[0.0, 0.0]], atol=1e-7)
    out = policy_loss(logp, jnp.zeros((1, 2)), adv, mask, asym)
    assert float(out.metrics["clip_high"]) == 0.0 and float(out.metrics["clip_low"]) == 1.0


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("kl, beta", [("k3", 0.0)] + [(k, 0.05) for k in KLS])
def test_loss_matches_numpy_reference(mode, kl, beta):
    batch = make_batch()
    cfg = config(mode, beta=beta, kl_estimator=kl)
    out = run(batch, cfg)
    num, den = ref_aggregate(ref_per_token(batch, cfg), batch["mask"], cfg)
    np.testing.assert_allclose(float(out.numerator), num, rtol=1e-5)
    assert float(out.denominator) == den
    np.testing.assert_allclose(float(loss_value(out.numerator, out.denominator)), num / den, rtol=1e-5)


@pytest.mark.parametrize("name", KLS)
def test_kl_estimators_match_reference_and_vanish_at_equality(name):
    logp = np.array([-0.1, -1.0, -2.5, -0.7], np.float32)
    ref = np.array([-0.3, -0.2, -2.5, -1.9], np.float32)
    got = np.asarray(get_kl_estimator(name)(jnp.asarray(logp), jnp.asarray(ref)))
    np.testing.assert_allclose(got, [ref_kl(a, b, name) for a, b in zip(logp, ref)], rtol=1e-5, atol=1e-7)
    assert got[2] == 0.0
    if name != "k1":
        assert (got >= 0).all()


def test_registries_hold_the_documented_names():
    assert set(KL_ESTIMATORS) == {"k1", "k2", "k3"}
    assert set(LOSS_AGGREGATIONS) == set(MODES)


@pytest.mark.parametrize("mode", MODES)
def test_gradient_matches_analytic_numpy_gradient(mode):
    batch = make_batch(seed=3)
    cfg = config(mode, beta=0.1, kl_estimator="k3")
    grad = np.asarray(jax.grad(lambda lp: run(batch, cfg, logprobs=lp).numerator)(jnp.asarray(batch["logprobs"])))
    # d/dlogp of each token's loss, times its aggregation weight.
    keys = ("logprobs", "old_logprobs", "ref_logprobs", "advantages", "mask")
    lp, old, ref, a, m = (np.float64(batch[k]) for k in keys)
    ratio = np.exp(lp - old)
    clipped_binds = ((a > 0) & (ratio > 1 + cfg.epsilon_high)) | ((a < 0) & (ratio < 1 - cfg.epsilon_low))
    d_token = np.where(clipped_binds, 0.0, -a * ratio) + cfg.beta * (1.0 - np.exp(ref - lp))
    n = m.sum(axis=1, keepdims=True)
    weight = {
        "token-mean": m,
        "seq-mean-token-mean": m / np.maximum(n, 1),
        "seq-mean-token-sum-norm": m / MAX_LEN,
    }[mode]
    np.testing.assert_allclose(grad, d_token * weight, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("mode", MODES)
def test_micro_batches_sum_to_the_full_batch(mode):
    batch = make_batch(seed=1)
    cfg = config(mode, beta=0.02, kl_estimator="k3")

    def grad_and_parts(part):
        def numerator(lp):
            return run(part, cfg, logprobs=lp).numerator

        return np.asarray(jax.grad(numerator)(jnp.asarray(part["logprobs"]))), run(part, cfg)

    full_grad, full = grad_and_parts(batch)
    grads, nums, dens, tokens = [], 0.0, 0.0, 0.0
    for rows in (slice(0, 2), slice(2, 3), slice(3, 6)):  # uneven micro-batches, one holding the masked row
        g, out = grad_and_parts({k: v[rows] for k, v in batch.items()})
        grads.append(g)
        nums += float(out.numerator)
        dens += float(out.denominator)
        tokens += float(out.metrics["tokens"])
    assert dens == float(full.denominator) and tokens == float(full.metrics["tokens"])
    np.testing.assert_allclose(nums / dens, float(full.numerator) / float(full.denominator), rtol=1e-6)
    np.testing.assert_allclose(np.concatenate(grads) / dens, full_grad / float(full.denominator), rtol=1e-6)


@pytest.mark.parametrize("mode", MODES)
def test_first_step_ratio_is_one_and_gradient_is_the_plain_policy_gradient(mode):
    batch = make_batch(seed=2)
    cfg = config(mode)
    same = {**batch, "old_logprobs": batch["logprobs"]}
    out = run(same, cfg)
    assert float(out.metrics["ratio"]) == float(out.metrics["tokens"])  # every ratio exactly 1
    assert float(out.metrics["clip_low"]) == float(out.metrics["clip_high"]) == float(out.metrics["approx_kl"]) == 0.0
    lp0 = jnp.asarray(batch["logprobs"])
    grad = jax.grad(lambda lp: run(same, cfg, logprobs=lp).numerator)(lp0)
    # REINFORCE with the same aggregation: minimise -A log pi.
    plain = config(mode)
    agg = LOSS_AGGREGATIONS[mode]
    m = jnp.asarray(batch["mask"], jnp.float32)
    pg_grad = jax.grad(lambda lp: agg(-jnp.asarray(batch["advantages"]) * lp, m, plain)[0])(lp0)
    np.testing.assert_allclose(np.asarray(grad), np.asarray(pg_grad), rtol=1e-6, atol=1e-8)


def test_garbage_at_masked_positions_does_not_leak():
    batch = make_batch(seed=4)
    cfg = config("token-mean", beta=0.1)
    dirty = {k: np.where(batch["mask"], v, np.float32(np.nan)) if k != "mask" else v for k, v in batch.items()}
    dirty["logprobs"] = np.where(batch["mask"], batch["logprobs"], -np.inf).astype(np.float32)
    clean_out, dirty_out = run(batch, cfg), run(dirty, cfg)
    assert float(dirty_out.numerator) == pytest.approx(float(clean_out.numerator), rel=1e-6)
    grad = jax.grad(lambda lp: run(dirty, cfg, logprobs=lp).numerator)(jnp.asarray(dirty["logprobs"]))
    assert np.isfinite(np.asarray(grad)).all()
    assert (np.asarray(grad)[~batch["mask"]] == 0).all()


def test_metrics_match_reference_and_summarize():
    batch = make_batch(seed=5)
    cfg = config("token-mean", beta=0.0, kl_estimator="k1")
    entropy = np.abs(batch["old_logprobs"])
    out = policy_loss(
        batch["logprobs"], batch["old_logprobs"], batch["advantages"], batch["mask"], cfg,
        batch["ref_logprobs"], entropy,
    )
    m = batch["mask"]
    lp, old, a = (np.float64(batch[k]) for k in ("logprobs", "old_logprobs", "advantages"))
    ratio = np.exp(lp - old)
    expected = {
        "tokens": m.sum(),
        "ratio": ratio[m].mean(),
        "clip_low": ((ratio < 0.8) & (a < 0))[m].mean(),
        "clip_high": ((ratio > 1.28) & (a > 0))[m].mean(),
        "approx_kl": (ratio - 1 - np.log(ratio))[m].mean(),
        "ref_kl": (lp - batch["ref_logprobs"])[m].mean(),
        "entropy": entropy[m].mean(),
        "pg_loss": ref_per_token(batch, cfg)[m].mean(),
    }
    summary = {k: float(v) for k, v in summarize_metrics(out.metrics).items()}
    assert set(summary) == set(expected)
    for key, value in expected.items():
        assert summary[key] == pytest.approx(value, rel=1e-5, abs=1e-7), key
    assert 0 < summary["clip_low"] + summary["clip_high"] < 1  # the batch really exercises clipping


def test_all_masked_batch_gives_zero_loss():
    batch = make_batch()
    out = run(batch, config(), mask=np.zeros_like(batch["mask"]))
    assert float(out.denominator) == 0.0 and float(loss_value(out.numerator, out.denominator)) == 0.0


def test_jit_with_static_config():
    batch = make_batch()
    cfg = config("seq-mean-token-mean", beta=0.05)
    eager = run(batch, cfg)
    jitted = jax.jit(policy_loss, static_argnames="config")(
        batch["logprobs"], batch["old_logprobs"], batch["advantages"], batch["mask"],
        config=cfg, ref_logprobs=batch["ref_logprobs"],
    )
    np.testing.assert_allclose(float(jitted.numerator), float(eager.numerator), rtol=1e-6)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"loss_agg_mode": "seq-mean-token-sum"}, "loss_agg_mode"),
        ({"kl_estimator": "k4"}, "KL estimator"),
        ({"loss_agg_mode": "seq-mean-token-sum-norm"}, "max_completion_length"),
        ({"epsilon_low": 1.0}, "epsilon_low"),
        ({"epsilon_high": -0.1}, "epsilon_high"),
        ({"beta": -1.0}, "beta"),
    ],
)
def test_bad_config_is_rejected(kwargs, message):
    with pytest.raises(ValueError, match=message):
        LossConfig(**kwargs)


def test_bad_inputs_are_rejected():
    batch = make_batch()
    with pytest.raises(ValueError, match="ref_logprobs"):
        run(batch, config(beta=0.1), ref_logprobs=None)
    with pytest.raises(ValueError, match=r"\[B, T\]"):
        run(batch, config(), advantages=batch["advantages"][:, 0])
