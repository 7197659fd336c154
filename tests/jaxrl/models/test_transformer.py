"""Transformer forward contract: KV cache, left padding, packed segments, remat, attention paths.

Weights are random (parity with transformers is in tests/jaxrl/checkpoint). float32 throughout,
so every comparison is tight.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from jaxrl.models import init_cache, tiny_llama, tiny_qwen3
from jaxrl.models import attention as attn

from random_weights import random_model

CONFIGS = {"qwen3": tiny_qwen3(), "llama": tiny_llama()}
ATOL = 2e-5


@pytest.fixture(autouse=True)
def full_float32_matmuls():
    """float32 comparisons need true float32 matmuls (GPUs default to TF32)."""
    with jax.default_matmul_precision("highest"):
        yield


# Random weights with norms away from 1, so every parameter influences the logits.
_random_model = nnx.jit(random_model, static_argnums=(0, 1))


@pytest.fixture(scope="module", params=sorted(CONFIGS))
def model(request):
    """Both families, for the tests where RoPE scaling, q/k norm or tied logits could interact."""
    return _random_model(CONFIGS[request.param])


@pytest.fixture(scope="module")
def qwen3_model():
    return _random_model(CONFIGS["qwen3"])


def _tokens(batch, length, seed=0, vocab=128):
    return jax.random.randint(jax.random.key(seed), (batch, length), 1, vocab)


def _positions(batch, length):
    return jnp.broadcast_to(jnp.arange(length), (batch, length))


@nnx.jit
def _forward(model, tokens, positions, segment_ids):
    return model(tokens, positions, segment_ids=segment_ids)[0]


@nnx.jit
def _forward_with(model, tokens, positions, attention_mask=None, segment_ids=None):
    return model(tokens, positions, attention_mask=attention_mask, segment_ids=segment_ids)[0]


@nnx.jit
def _step(model, tokens, positions, segment_ids, cache, cache_index):
    return model(tokens, positions, segment_ids=segment_ids, cache=cache, cache_index=cache_index)


def test_logits_are_float32_and_sensitive_to_inputs(qwen3_model):
    model = qwen3_model
    tokens = _tokens(2, 8)
    logits = _forward(model, tokens, _positions(2, 8), jnp.ones((2, 8), jnp.int32))
    assert logits.shape == (2, 8, model.config.vocab_size) and logits.dtype == jnp.float32
    assert float(jnp.std(logits)) > 0.5  # not a degenerate model that would hide mapping errors
    other = _forward(model, tokens.at[:, 0].set(tokens[:, 0] % 100 + 1), _positions(2, 8), jnp.ones((2, 8), jnp.int32))
    assert float(jnp.abs(other[:, -1] - logits[:, -1]).max()) > 1e-3  # the last token sees the first


def test_prefill_then_decode_equals_full_forward(model):
    batch, length, prefill = 2, 12, 5
    tokens, positions = _tokens(batch, length, seed=1), _positions(batch, length)
    ones = jnp.ones((batch, length), jnp.int32)
    full = _forward(model, tokens, positions, ones)

    cache = init_cache(model.config, batch, max_len=16)
    logits, cache = _step(model, tokens[:, :prefill], positions[:, :prefill], ones[:, :prefill], cache, 0)
    np.testing.assert_allclose(logits, full[:, :prefill], atol=ATOL)
    for t in range(prefill, length):
        logits, cache = _step(model, tokens[:, t:t + 1], positions[:, t:t + 1], ones[:, t:t + 1], cache, t)
        np.testing.assert_allclose(logits[:, 0], full[:, t], atol=ATOL, err_msg=f"decode step {t}")
    assert int(cache.segment_ids[:, :length].min()) == 1 and int(cache.segment_ids[:, length:].max()) == 0


def test_left_padding_matches_unpadded_rows(model):
    """Rows of different lengths, left-padded, give each row's unpadded logits, with and without cache."""
    lengths, width, new_tokens = [7, 4], 7, 3
    rows = [_tokens(1, n + new_tokens, seed=10 + i)[0] for i, n in enumerate(lengths)]
    pad = [width - n for n in lengths]
    tokens = jnp.stack([jnp.concatenate([jnp.zeros(p, jnp.int32), r[:n]]) for p, n, r in zip(pad, lengths, rows)])
    mask = jnp.stack([jnp.concatenate([jnp.zeros(p, jnp.int32), jnp.ones(n, jnp.int32)]) for p, n in zip(pad, lengths)])
    positions = jnp.maximum(jnp.cumsum(mask, axis=1) - 1, 0)

    cache = init_cache(model.config, 2, max_len=width + new_tokens)
    prefill, cache = _step(model, tokens, positions, mask, cache, 0)
    decoded = []
    for step in range(new_tokens):
        next_tokens = jnp.stack([r[n + step] for r, n in zip(rows, lengths)])[:, None]
        next_pos = jnp.asarray([[n + step] for n in lengths])
        logits, cache = _step(model, next_tokens, next_pos, jnp.ones((2, 1), jnp.int32), cache, width + step)
        decoded.append(logits[:, 0])

    padded_no_cache = _forward(model, tokens, positions, mask)
    for i, (row, n, p) in enumerate(zip(rows, lengths, pad)):
        alone = _forward(model, row[None], _positions(1, n + new_tokens), jnp.ones((1, n + new_tokens), jnp.int32))[0]
        np.testing.assert_allclose(prefill[i, p:], alone[:n], atol=ATOL)
        np.testing.assert_allclose(padded_no_cache[i, p:], alone[:n], atol=ATOL)
        for step in range(new_tokens):
            np.testing.assert_allclose(decoded[step][i], alone[n + step], atol=ATOL)
    assert bool(jnp.isfinite(prefill).all())  # padded queries stay finite too


def test_packed_segments_equal_separate_sequences(model):
    a, b = _tokens(1, 5, seed=3)[0], _tokens(1, 4, seed=4)[0]
    tokens = jnp.concatenate([a, b, jnp.zeros(3, jnp.int32)])[None]
    segments = jnp.asarray([[1] * 5 + [2] * 4 + [0] * 3])
    positions = jnp.asarray([list(range(5)) + list(range(4)) + [0] * 3])
    packed = _forward(model, tokens, positions, segments)[0]
    for seq, start in ((a, 0), (b, 5)):
        n = seq.shape[0]
        alone = _forward(model, seq[None], _positions(1, n), jnp.ones((1, n), jnp.int32))[0]
        np.testing.assert_allclose(packed[start:start + n], alone, atol=ATOL)
    assert bool(jnp.isfinite(packed).all())


def test_attention_mask_is_segment_ids_of_one(qwen3_model):
    model = qwen3_model
    tokens, positions = _tokens(2, 6, seed=5), _positions(2, 6)
    mask = jnp.asarray([[1] * 6, [0, 0, 1, 1, 1, 1]])
    by_mask = _forward_with(model, tokens, positions, attention_mask=mask)
    by_segments = _forward_with(model, tokens, positions, segment_ids=mask)
    np.testing.assert_array_equal(by_mask, by_segments)
    default = _forward_with(model, tokens, positions)
    np.testing.assert_allclose(default, _forward(model, tokens, positions, jnp.ones((2, 6), jnp.int32)), atol=ATOL)


def test_fully_padded_row_stays_finite(qwen3_model):
    model = qwen3_model
    tokens = _tokens(2, 4, seed=6)
    logits = _forward(model, tokens, _positions(2, 4), jnp.asarray([[0, 0, 0, 0], [1, 1, 1, 1]]))
    assert bool(jnp.isfinite(logits).all())


@nnx.jit
def _value_and_grad(model, tokens, positions):
    def loss(model):
        logits = model(tokens, positions)[0]
        return jnp.mean(jax.nn.log_softmax(logits)[..., 0])

    return nnx.value_and_grad(loss)(model)


@pytest.mark.parametrize("remat", ["full", "dots"])
def test_remat_keeps_logits_and_gradients(remat):
    tokens, positions = _tokens(2, 8, seed=7), _positions(2, 8)
    value, grads = _value_and_grad(_random_model(tiny_qwen3()), tokens, positions)
    value_r, grads_r = _value_and_grad(_random_model(tiny_qwen3(remat=remat)), tokens, positions)
    assert value == pytest.approx(float(value_r), abs=1e-6)
    for g, g_r in zip(jax.tree.leaves(grads), jax.tree.leaves(grads_r)):
        np.testing.assert_allclose(g, g_r, atol=1e-6)


def test_bad_inputs_are_rejected(qwen3_model):
    model = qwen3_model
    tokens, positions = _tokens(1, 4), _positions(1, 4)
    ones = jnp.ones((1, 4), jnp.int32)
    with pytest.raises(ValueError, match="not both"):
        model(tokens, positions, attention_mask=ones, segment_ids=ones)
    with pytest.raises(ValueError, match="together"):
        model(tokens, positions, cache=init_cache(model.config, 1, 8))
    with pytest.raises(ValueError, match="overflows"):
        model(tokens, positions, cache=init_cache(model.config, 1, 8), cache_index=6)
    with pytest.raises(ValueError, match="batch"):
        model(tokens, positions, cache=init_cache(model.config, 2, 8), cache_index=0)
    with pytest.raises(ValueError, match=r"\[B, T\]"):
        model(tokens, positions[:, :3])


@pytest.mark.parametrize("equation", ["...d,vd->...v", "...d,dv->...v"])
def test_vocab_projection_backward_runs_in_the_compute_dtype(equation):
    """Forward: float32 logits as a float32-accumulating einsum. Backward: exactly plain autodiff for a
    float32 model; for bf16, the gradients of the einsum at the cotangent rounded to bf16."""
    from jaxrl.models.transformer import vocab_projection

    kh, kw, kg = jax.random.split(jax.random.key(3), 3)
    w_shape = (40, 16) if equation.startswith("...d,vd") else (16, 40)
    hidden32, weight32 = jax.random.normal(kh, (2, 5, 16)), jax.random.normal(kw, w_shape)
    target = jax.random.normal(kg, (2, 5, 40))

    def loss(projection, h, w):
        return (projection(h, w) * target).sum()

    custom = lambda h, w: vocab_projection(h, w, equation)  # noqa: E731
    plain = lambda h, w: jnp.einsum(equation, h, w, preferred_element_type=jnp.float32)  # noqa: E731
    for got, want in zip(jax.grad(loss, (1, 2))(custom, hidden32, weight32),
                         jax.grad(loss, (1, 2))(plain, hidden32, weight32)):
        np.testing.assert_array_equal(got, want)

    hidden, weight = hidden32.astype(jnp.bfloat16), weight32.astype(jnp.bfloat16)
    logits = custom(hidden, weight)
    assert logits.dtype == jnp.float32
    np.testing.assert_allclose(logits, plain(hidden, weight), rtol=1e-6)
    grads = jax.grad(loss, (1, 2))(custom, hidden, weight)
    _, pullback = jax.vjp(lambda h, w: jnp.einsum(equation, h, w), hidden, weight)
    for got, want in zip(grads, pullback(target.astype(jnp.bfloat16))):
        assert got.dtype == jnp.bfloat16
        np.testing.assert_array_equal(got, want)


def test_mask_rules():
    """Causal within a segment, never into padding or empty slots, always the query's own slot."""
    q_segments = jnp.asarray([[1, 1, 2, 0]])
    mask = attn.attention_mask(q_segments, jnp.arange(4), q_segments)[0]
    expected = np.array([[1, 0, 0, 0], [1, 1, 0, 0], [0, 0, 1, 0], [0, 0, 0, 1]], bool)
    np.testing.assert_array_equal(mask, expected)


def test_fast_attention_needs_a_gpu_dtype():
    config = tiny_qwen3(attention_impl="fast")
    if jax.default_backend() != "gpu":
        with pytest.raises(ValueError, match="fast"):
            attn.resolve_impl(config)
    assert attn.resolve_impl(tiny_qwen3(attention_impl="auto")) == "reference"  # float32 never takes cuDNN


def _attention_inputs(head_dim: int, dtype, layout: str):
    """q, k, v and the Mask of one of the three layouts the fast path distinguishes.

    "cache": queries at slots 8..23 of 32 cached slots (no causal shortcut); "packed": two segments and
    padding in a row, no cache; "one_per_row": each row one sequence from slot 0, then padding."""
    b, n, k = 2, 8, 2
    t = 16
    s = 32 if layout == "cache" else t
    keys = jax.random.split(jax.random.key(0), 3)
    q = jax.random.normal(keys[0], (b, t, n, head_dim), dtype)
    kk = jax.random.normal(keys[1], (b, s, k, head_dim), dtype)
    v = jax.random.normal(keys[2], (b, s, k, head_dim), dtype)
    if layout == "cache":
        k_segments = jnp.asarray([[0] * 4 + [1] * 20 + [2] * 8, [1] * 12 + [0] * 20])
        q_slots = jnp.arange(t) + 8
        q_segments = jax.lax.dynamic_slice(k_segments, (0, 8), (b, t))
    else:
        q_segments = (jnp.asarray([[1] * 6 + [2] * 7 + [0] * 3, [1] * 16]) if layout == "packed"
                      else jnp.asarray([[1] * 11 + [0] * 5, [1] * 16]))
        q_slots, k_segments = jnp.arange(t), q_segments
    lengths = attn.one_sequence_lengths(q_segments) if layout == "one_per_row" else None
    return q, kk, v, attn.Mask(attn.attention_mask(q_segments, q_slots, k_segments), lengths), q_segments != 0


@pytest.mark.parametrize("layout", ["cache", "packed", "one_per_row"])
def test_each_fast_attention_form_means_the_dense_mask(layout):
    """The causal and sequence-length shortcuts handed to the fused kernel change no real token's output
    or gradient (checked through JAX's XLA implementation of the same call; cuDNN itself on the GPU)."""
    q, k, v, mask, valid = _attention_inputs(32, jnp.float32, layout)
    at_slots = layout != "cache"

    def real_token_sum(fn, q, k, v):
        out = fn(q, k, v)
        return jnp.where(valid[:, :, None, None], out * jnp.cos(out), 0.0).sum(), out

    fast = lambda q, k, v: attn.fast_attention(q, k, v, mask, at_slots, implementation="xla")  # noqa: E731
    reference = lambda q, k, v: attn.reference_attention(q, k, v, mask.dense)  # noqa: E731
    (_, out_fast), grads_fast = jax.value_and_grad(real_token_sum, argnums=(1, 2, 3), has_aux=True)(fast, q, k, v)
    (_, out_ref), grads_ref = jax.value_and_grad(real_token_sum, argnums=(1, 2, 3), has_aux=True)(reference, q, k, v)
    keep = valid[:, :, None, None]
    np.testing.assert_allclose(jnp.where(keep, out_fast, 0), jnp.where(keep, out_ref, 0), atol=1e-5)
    for g_fast, g_ref in zip(grads_fast, grads_ref):
        assert bool(jnp.isfinite(g_fast).all())
        np.testing.assert_allclose(g_fast, g_ref, atol=1e-5)


def test_one_sequence_per_row_is_for_rows_without_a_cache(qwen3_model):
    tokens, positions = _tokens(1, 4), _positions(1, 4)
    with pytest.raises(ValueError, match="one_sequence_per_row"):
        qwen3_model(tokens, positions, cache=init_cache(qwen3_model.config, 1, 8), cache_index=0,
                    one_sequence_per_row=True)
    segments = jnp.asarray([[1, 1, 1, 0]])
    plain, _ = qwen3_model(tokens, positions, segment_ids=segments)
    promised, _ = qwen3_model(tokens, positions, segment_ids=segments, one_sequence_per_row=True)
    np.testing.assert_allclose(promised[:, :3], plain[:, :3], atol=ATOL)


@pytest.mark.gpu
@pytest.mark.parametrize("layout", ["cache", "packed", "one_per_row"])
@pytest.mark.parametrize("head_dim", [64, 128])
def test_fast_attention_matches_reference_on_gpu(head_dim, layout):
    """cuDNN and the reference agree on real tokens, outputs and gradients, for each mask form."""
    q, kk, v, mask, valid = _attention_inputs(head_dim, jnp.bfloat16, layout)
    at_slots = layout != "cache"
    keep = valid[:, :, None, None]

    def real_token_sum(fn, q, k, v):
        out = fn(q, k, v).astype(jnp.float32)
        return jnp.where(keep, out, 0.0).sum(), out

    fast = lambda q, k, v: attn.fast_attention(q, k, v, mask, at_slots)  # noqa: E731
    reference = lambda q, k, v: attn.reference_attention(q, k, v, mask.dense)  # noqa: E731
    (_, out_fast), grads_fast = jax.value_and_grad(real_token_sum, argnums=(1, 2, 3), has_aux=True)(fast, q, kk, v)
    (_, out_ref), grads_ref = jax.value_and_grad(real_token_sum, argnums=(1, 2, 3), has_aux=True)(reference, q, kk, v)
    np.testing.assert_allclose(jnp.where(keep, out_fast, 0), jnp.where(keep, out_ref, 0), atol=2e-2)
    for g_fast, g_ref in zip(grads_fast, grads_ref):
        g_fast, g_ref = g_fast.astype(jnp.float32), g_ref.astype(jnp.float32)
        assert bool(jnp.isfinite(g_fast).all())
        np.testing.assert_allclose(g_fast, g_ref, atol=0.05 * float(jnp.abs(g_ref).max()))

    config = tiny_qwen3(dtype="bfloat16", head_dim=head_dim)
    assert attn.resolve_impl(config) == "fast"
    model_fast = _random_model(config)
    model_ref = _random_model(config.replace(attention_impl="reference"))
    tokens, positions = _tokens(2, 16, seed=8), _positions(2, 16)
    segments = jnp.asarray([[1] * 16, [0] * 3 + [1] * 13])
    out_fast = _forward(model_fast, tokens, positions, segments)
    out_ref = _forward(model_ref, tokens, positions, segments)
    assert bool(jnp.isfinite(out_fast).all())
    np.testing.assert_allclose(out_fast, out_ref, atol=0.03 * float(jnp.abs(out_ref).max()))
    right_padded = jnp.asarray([[1] * 16, [1] * 13 + [0] * 3])
    one_per_row, _ = nnx.jit(lambda m, t, p, s: m(t, p, segment_ids=s, one_sequence_per_row=True))(
        model_fast, tokens, positions, right_padded)
    out_ref = _forward(model_ref, tokens, positions, right_padded)
    real = (right_padded != 0)[:, :, None]
    np.testing.assert_allclose(jnp.where(real, one_per_row, 0), jnp.where(real, out_ref, 0),
                               atol=0.03 * float(jnp.abs(out_ref).max()))


@pytest.mark.gpu
def test_fast_attention_decoding_matches_reference_on_gpu():
    """Prefill and single-token decode steps (T = 1) through cuDNN agree with the reference path."""
    config = tiny_qwen3(dtype="bfloat16", head_dim=64, attention_impl="fast")
    model_fast = _random_model(config)
    model_ref = _random_model(config.replace(attention_impl="reference"))
    tokens, positions = _tokens(2, 12, seed=9), _positions(2, 12)
    segments = jnp.asarray([[1] * 12, [0] * 4 + [1] * 8])
    results = []
    for model in (model_fast, model_ref):
        cache = init_cache(config, 2, 16)
        logits, cache = _step(model, tokens[:, :8], positions[:, :8], segments[:, :8], cache, 0)
        steps = [logits]
        for t in range(8, 12):
            logits, cache = _step(model, tokens[:, t:t + 1], positions[:, t:t + 1], segments[:, t:t + 1], cache, t)
            steps.append(logits)
        results.append(jnp.concatenate(steps, axis=1))
    fast, reference = results
    assert bool(jnp.isfinite(fast).all())
    np.testing.assert_allclose(fast, reference, atol=0.03 * float(jnp.abs(reference).max()))
