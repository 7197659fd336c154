"""Chunked log-probs and per-token entropy of the policy against a NumPy reference on a tiny model."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from jaxrl.models.config import tiny_qwen3
from jaxrl.models.transformer import init_model
from jaxrl.training.logprobs import token_logprobs, token_logprobs_and_entropy

B, T = 2, 16


@pytest.fixture(scope="module")
def model():
    m = init_model(tiny_qwen3(), seed=3)
    # Random init gives near-uniform logits (entropy ~ log V everywhere); a large final-norm scale makes
    # the next-token distributions peaked and different from position to position.
    m.final_norm.scale.set_value(jnp.full_like(m.final_norm.scale.get_value(), 60.0))
    return m


@pytest.fixture(scope="module")
def batch():
    rng = np.random.default_rng(0)
    tokens = rng.integers(0, 128, (B, T)).astype(np.int32)
    positions = np.tile(np.arange(T, dtype=np.int32), (B, 1))
    segment_ids = np.ones((B, T), np.int32)
    segment_ids[1, 10:] = 0  # padding
    targets = np.roll(tokens, -1, axis=1)
    return tuple(jnp.asarray(x) for x in (tokens, positions, segment_ids, targets))


def numpy_reference(model, tokens, positions, segment_ids, targets):
    logits, _ = model(tokens, positions, segment_ids=segment_ids)
    z = np.asarray(logits, np.float64)
    z = z - z.max(-1, keepdims=True)
    logp_all = z - np.log(np.exp(z).sum(-1, keepdims=True))
    picked = np.take_along_axis(logp_all, np.asarray(targets)[..., None], axis=-1)[..., 0]
    entropy = -(np.exp(logp_all) * logp_all).sum(-1)
    return picked, entropy


@pytest.mark.parametrize("chunk", [0, 4])
def test_entropy_and_logprobs_match_numpy(model, batch, chunk):
    want_logp, want_entropy = numpy_reference(model, *batch)
    logp, entropy = token_logprobs_and_entropy(model, *batch, chunk=chunk)
    assert logp.dtype == entropy.dtype == jnp.float32 and entropy.shape == (B, T)
    assert want_entropy.std() > 0.3  # the distributions really differ between positions
    np.testing.assert_allclose(entropy, want_entropy, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(logp, want_logp, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(logp, token_logprobs(model, *batch, chunk=chunk), rtol=1e-6, atol=1e-6)


def test_entropy_is_bounded_by_the_uniform_distribution(model, batch):
    _, entropy = token_logprobs_and_entropy(model, *batch, chunk=8)
    assert float(entropy.min()) >= 0.0 and float(entropy.max()) <= np.log(128) + 1e-5


def test_entropy_carries_no_gradient(model, batch):
    """Asking for the entropy leaves the log-prob gradient unchanged, and the entropy has none itself."""
    graphdef, params = nnx.split(model)

    def loss(p, use_entropy_fn, weight):
        m = nnx.merge(graphdef, p)
        if use_entropy_fn:
            logp, entropy = token_logprobs_and_entropy(m, *batch, chunk=4)
            return logp.sum() + weight * entropy.sum()
        return token_logprobs(m, *batch, chunk=4).sum()

    grad = jax.jit(jax.grad(loss), static_argnums=1)  # one compiled program instead of op-by-op dispatch
    plain = grad(params, False, 0.0)
    with_entropy = grad(params, True, 1.0)
    for a, b in zip(jax.tree.leaves(plain), jax.tree.leaves(with_entropy)):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-7)
    only_entropy = jax.jit(jax.grad(lambda p: token_logprobs_and_entropy(nnx.merge(graphdef, p), *batch)[1].sum()))(
        params)
    assert all(not np.any(np.asarray(g)) for g in jax.tree.leaves(only_entropy))


def test_chunk_must_divide_the_sequence(model, batch):
    with pytest.raises(ValueError, match="must divide"):
        token_logprobs_and_entropy(model, *batch, chunk=5)
