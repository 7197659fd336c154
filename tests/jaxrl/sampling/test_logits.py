"""Sampling math: temperature, top-k, top-p, greedy, and the reported logprob."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxrl.sampling.logits import FILTERED, GREEDY, SAMPLE, SamplingArgs, draw, filter_logits, mode_for

LOGITS = jnp.log(jnp.asarray([[0.5, 0.25, 0.15, 0.07, 0.03]]))  # probabilities at T = 1


def _frequencies(logits, args, mode, n=4000):
    keys = jax.random.split(jax.random.key(0), n)
    tokens, _ = jax.jit(draw, static_argnums=3)(jnp.repeat(logits, n, axis=0), keys, args, mode)
    return np.bincount(np.asarray(tokens), minlength=logits.shape[-1]) / n


def test_mode_selection():
    assert mode_for(0.0, 5, 0.5) == GREEDY
    assert mode_for(1.0, 0, 1.0) == SAMPLE
    assert mode_for(0.7, 3, 1.0) == FILTERED and mode_for(0.7, 0, 0.9) == FILTERED


def test_filter_keeps_top_k_then_the_nucleus():
    kept = lambda k, p: np.isfinite(np.asarray(filter_logits(LOGITS, jnp.int32(k), jnp.float32(p))))[0]
    assert kept(0, 1.0).tolist() == [True] * 5
    assert kept(2, 1.0).tolist() == [True, True, False, False, False]
    # nucleus: the smallest prefix whose mass reaches p (0.5, 0.75, 0.9, 0.97, 1.0)
    assert kept(0, 0.5).tolist() == [True, False, False, False, False]
    assert kept(0, 0.8).tolist() == [True, True, True, False, False]
    assert kept(0, 0.01).tolist() == [True, False, False, False, False]  # the top token always stays
    # top-p applies to what top-k left: renormalised (0.5, 0.25, 0.15) / 0.9
    assert kept(3, 0.8).tolist() == [True, True, False, False, False]
    assert kept(9, 1.0).tolist() == [True] * 5  # k above the vocabulary keeps everything
    kept_values = filter_logits(LOGITS, jnp.int32(2), jnp.float32(1.0))
    np.testing.assert_array_equal(kept_values[0, :2], LOGITS[0, :2])  # kept logits are unchanged


def test_sampling_frequencies_follow_the_tempered_distribution():
    freq = _frequencies(LOGITS, SamplingArgs.of(1.0, 0, 1.0), SAMPLE)
    np.testing.assert_allclose(freq, [0.5, 0.25, 0.15, 0.07, 0.03], atol=0.03)
    cold = np.asarray(jax.nn.softmax(LOGITS / 0.5))[0]
    np.testing.assert_allclose(_frequencies(LOGITS, SamplingArgs.of(0.5, 0, 1.0), SAMPLE), cold, atol=0.03)


def test_filtered_sampling_renormalises_over_the_kept_tokens():
    freq = _frequencies(LOGITS, SamplingArgs.of(1.0, 2, 1.0), FILTERED)
    np.testing.assert_allclose(freq, [2 / 3, 1 / 3, 0, 0, 0], atol=0.03)
    assert freq[2:].sum() == 0
    freq = _frequencies(LOGITS, SamplingArgs.of(1.0, 0, 0.8), FILTERED)
    np.testing.assert_allclose(freq, [0.5 / 0.9, 0.25 / 0.9, 0.15 / 0.9, 0, 0], atol=0.03)


def test_logprob_is_the_tempered_policy_before_truncation():
    logits = jnp.repeat(LOGITS, 3, axis=0)
    keys = jax.random.split(jax.random.key(1), 3)
    for temperature, top_k, top_p, mode in [(0.7, 2, 0.9, FILTERED), (1.3, 0, 1.0, SAMPLE)]:
        tokens, logprobs = draw(logits, keys, SamplingArgs.of(temperature, top_k, top_p), mode)
        expected = jax.nn.log_softmax(logits / temperature)[jnp.arange(3), tokens]
        np.testing.assert_allclose(logprobs, expected, rtol=1e-6)
    tokens, logprobs = draw(logits, keys, SamplingArgs.of(0.0, 0, 1.0), GREEDY)
    assert tokens.tolist() == [0, 0, 0]
    np.testing.assert_allclose(logprobs, np.log(0.5), rtol=1e-6)  # greedy reports the T = 1 logprob


def test_top_k_one_is_greedy():
    logits = jax.random.normal(jax.random.key(2), (16, 50))
    keys = jax.random.split(jax.random.key(3), 16)
    greedy, _ = draw(logits, keys, SamplingArgs.of(0.0, 0, 1.0), GREEDY)
    top1, _ = draw(logits, keys, SamplingArgs.of(1.0, 1, 1.0), FILTERED)
    np.testing.assert_array_equal(top1, greedy)
    with pytest.raises(ValueError, match="mode"):
        draw(logits, keys, SamplingArgs.of(1.0, 1, 1.0), "beam")
