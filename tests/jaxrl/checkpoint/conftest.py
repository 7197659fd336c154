"""Tiny random transformers models (torch, float32) for parity tests, offered as fixtures.

Helpers are fixtures rather than an importable module so the tests work under any pytest import mode."""

from __future__ import annotations

import numpy as np
import pytest

TINY = dict(vocab_size=128, hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
            num_key_value_heads=2, max_position_embeddings=256)
HF_CONFIGS = {
    # untied head, q/k norm, head_dim != hidden / heads
    "qwen3": dict(TINY, head_dim=32, tie_word_embeddings=False, rope_theta=10000.0),
    # tied embeddings, llama3 rope scaling (affects low frequencies at these positions)
    "llama": dict(TINY, tie_word_embeddings=True, rope_theta=500000.0,
                  rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                                "high_freq_factor": 4.0, "original_max_position_embeddings": 16}),
}


def _make_hf_model(family: str, seed: int = 0, **overrides):
    """A random HF model whose weights are large enough (and norms far enough from 1) that any
    mapping mistake changes the logits by far more than the parity tolerance."""
    import torch
    from transformers import AutoModelForCausalLM, LlamaConfig, Qwen3Config

    config_cls = {"qwen3": Qwen3Config, "llama": LlamaConfig}[family]
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(config_cls(**{**HF_CONFIGS[family], **overrides}), dtype=torch.float32)
    with torch.no_grad():
        for name, param in model.named_parameters():
            if param.ndim == 1:
                param.copy_(1.0 + 0.2 * torch.randn_like(param))
            else:
                param.copy_(0.15 * torch.randn_like(param))
    return model.eval()


def _hf_logits(model, tokens: np.ndarray, attention_mask: np.ndarray | None = None) -> np.ndarray:
    import torch

    with torch.no_grad():
        kwargs = {} if attention_mask is None else {"attention_mask": torch.tensor(attention_mask)}
        return model(torch.tensor(np.asarray(tokens)), **kwargs).logits.float().numpy()


@pytest.fixture(scope="session")
def make_hf_model():
    """make_hf_model(family, seed=0, **config_overrides) -> a random torch model in eval mode."""
    return _make_hf_model


@pytest.fixture(scope="session")
def hf_logits():
    """hf_logits(torch_model, tokens) -> float32 numpy logits."""
    return _hf_logits


@pytest.fixture(scope="session", params=sorted(HF_CONFIGS))
def hf_checkpoint(request, tmp_path_factory):
    """(family, torch model, folder written by save_pretrained)."""
    model = _make_hf_model(request.param)
    folder = tmp_path_factory.mktemp(f"hf_{request.param}")
    model.save_pretrained(folder)
    return request.param, model, folder


@pytest.fixture(scope="session")
def tokens() -> np.ndarray:
    return np.random.default_rng(0).integers(1, TINY["vocab_size"], size=(2, 24), dtype=np.int32)
