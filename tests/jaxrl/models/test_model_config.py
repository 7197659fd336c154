"""ModelConfig: reading HF config.json (transformers 4 and 5 spellings), validation, RoPE frequencies."""

from __future__ import annotations

import json

import numpy as np
import pytest

from jaxrl.models import ModelConfig, RopeScaling, qwen3_0_6b, qwen3_8b, smollm2_135m, tiny_llama, tiny_qwen3
from jaxrl.models.rope import inv_frequencies

QWEN3_V5 = {
    "architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "vocab_size": 151936, "hidden_size": 1024,
    "num_hidden_layers": 28, "num_attention_heads": 16, "num_key_value_heads": 8, "head_dim": 128,
    "intermediate_size": 3072, "rms_norm_eps": 1e-6, "tie_word_embeddings": True, "hidden_act": "silu",
    "max_position_embeddings": 40960, "dtype": "bfloat16", "eos_token_id": 151645, "bos_token_id": 151643,
    "rope_parameters": {"rope_theta": 1000000.0, "rope_type": "default"},
    "layer_types": ["full_attention"] * 28, "use_sliding_window": False, "attention_bias": False,
}

LLAMA_V4 = {
    "model_type": "llama", "vocab_size": 128256, "hidden_size": 2048, "num_hidden_layers": 16,
    "num_attention_heads": 32, "num_key_value_heads": 8, "intermediate_size": 8192, "rms_norm_eps": 1e-5,
    "tie_word_embeddings": True, "torch_dtype": "bfloat16", "rope_theta": 500000.0,
    "eos_token_id": [128001, 128008, 128009],
    "rope_scaling": {"rope_type": "llama3", "factor": 32.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                     "original_max_position_embeddings": 8192},
}


def test_reads_transformers5_config():
    config = ModelConfig.from_hf_config(QWEN3_V5)
    assert config == qwen3_0_6b(bos_token_id=151643)
    assert config.qk_norm and config.rope_scaling is None and config.rope_theta == 1e6


def test_reads_transformers4_config_with_llama3_scaling():
    config = ModelConfig.from_hf_config(LLAMA_V4)
    assert config.family == "llama" and not config.qk_norm
    assert config.head_dim == 64  # hidden_size / heads when head_dim is absent
    assert config.rope_theta == 500000.0
    assert config.rope_scaling == RopeScaling("llama3", 32.0, 1.0, 4.0, 8192)
    assert config.eos_token_ids == (128001, 128008, 128009)
    assert config.dtype == "bfloat16"


def test_reads_a_folder_and_applies_overrides(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps(QWEN3_V5))
    config = ModelConfig.from_hf_config(tmp_path, dtype="float32", remat="full")
    assert config.dtype == "float32" and config.remat == "full" and config.num_layers == 28
    with pytest.raises(FileNotFoundError):
        ModelConfig.from_hf_config(tmp_path / "missing")


@pytest.mark.parametrize("config", [tiny_qwen3(), tiny_llama(), qwen3_8b(), smollm2_135m()], ids=lambda c: c.family)
def test_hf_config_round_trip(config):
    assert ModelConfig.from_hf_config(config.to_hf_config()) == config.replace(dtype=config.param_dtype)


@pytest.mark.parametrize(
    "change, message",
    [
        ({"model_type": "gpt2"}, "unsupported model_type"),
        ({"hidden_act": "gelu"}, "hidden_act"),
        ({"attention_bias": True}, "attention_bias"),
        ({"use_sliding_window": True}, "sliding-window"),
        ({"layer_types": ["sliding_attention"] * 28}, "full_attention"),
        ({"num_key_value_heads": 5}, "multiple of num_kv_heads"),
        ({"rope_parameters": {"rope_theta": 1e6, "rope_type": "dynamic", "factor": 2.0}}, "rope_type"),
    ],
)
def test_rejects_unsupported_configs(change, message):
    with pytest.raises(ValueError, match=message):
        ModelConfig.from_hf_config({**QWEN3_V5, **change})


def test_validates_fields():
    with pytest.raises(ValueError, match="family"):
        tiny_qwen3(family="gpt")
    with pytest.raises(ValueError, match="remat"):
        tiny_qwen3(remat="some")
    with pytest.raises(ValueError, match="attention_impl"):
        tiny_qwen3(attention_impl="flash")
    with pytest.raises(ValueError, match="dtype"):
        tiny_qwen3(dtype="int8")
    with pytest.raises(ValueError, match="positive"):
        tiny_qwen3(num_layers=0)
    with pytest.raises(ValueError, match="llama3 rope scaling needs"):
        RopeScaling("llama3", 8.0)


def test_preset_parameter_counts():
    assert round(qwen3_0_6b().num_params() / 1e6) == 596  # Qwen3-0.6B: 0.6B with tied embeddings
    assert round(qwen3_8b().num_params() / 1e8) == 82  # Qwen3-8B: 8.2B
    assert round(smollm2_135m().num_params() / 1e6) == 135


ROPE_CASES = {
    "default": None,
    "linear": {"rope_type": "linear", "factor": 4.0},
    "llama3": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
               "original_max_position_embeddings": 256},
    "yarn": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 512},
}


@pytest.mark.parametrize("rope_type", sorted(ROPE_CASES))
def test_rope_frequencies_match_transformers(rope_type):
    pytest.importorskip("torch")
    from transformers import LlamaConfig
    from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding

    scaling = ROPE_CASES[rope_type]
    hf = LlamaConfig(hidden_size=256, num_attention_heads=2, rope_theta=50000.0, rope_scaling=scaling,
                     max_position_embeddings=2048)
    rotary = LlamaRotaryEmbedding(hf)
    config = ModelConfig.from_hf_config(hf.to_dict())
    assert (config.rope_scaling is None) == (scaling is None)
    inv_freq, attention_factor = inv_frequencies(config)
    np.testing.assert_allclose(inv_freq, rotary.inv_freq.numpy(), rtol=1e-6)
    assert attention_factor == pytest.approx(rotary.attention_scaling)
    if rope_type != "default":  # the scaling must actually change something
        plain = inv_frequencies(config.replace(rope_scaling=None))[0]
        assert not np.allclose(plain, inv_freq)
