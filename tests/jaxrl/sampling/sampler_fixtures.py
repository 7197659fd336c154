"""Fixtures of the sampler tests and the `sample` command tests: a character-level tokenizer matching the tiny models' 128-token
vocabulary, random tiny models with weights large enough that greedy choices are far from ties, and
a reference full-forward (no cache) for checking decoded tokens and logprobs.

Helpers are fixtures (the random weights come from tests/random_weights.py, shared with the model tests)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from jaxrl.models import tiny_llama, tiny_qwen3

from random_weights import random_model

PAD, EOS = 0, 1
# 2 specials + 126 one-character tokens = the tiny configs' vocab_size of 128: every id decodes to one char.
CHARS = [chr(c) for c in range(32, 127)] + ["\n", "\t"] + [chr(c) for c in range(0xC0, 0xC0 + 29)]
CHAT_TEMPLATE = (
    "{% for m in messages %}<{{ m['role'] }}>{{ m['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}<assistant>{% endif %}"
)


def _char_tokenizer():
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {"<pad>": PAD, "<eos>": EOS, **{ch: i + 2 for i, ch in enumerate(CHARS)}}
    assert len(vocab) == 128
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<pad>"))
    tok.pre_tokenizer = pre_tokenizers.Split(Regex(r"[\s\S]"), behavior="isolated")
    tok.decoder = decoders.Fuse()
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<eos>", pad_token="<pad>")
    fast.chat_template = CHAT_TEMPLATE
    return fast


@pytest.fixture(scope="session")
def char_tokenizer():
    """One token per character, <pad> = 0, <eos> = 1, with a small chat template."""
    return _char_tokenizer()


@pytest.fixture(scope="session")
def make_model():
    """make_model(family="qwen3", seed=0) -> a random tiny model (tiny_qwen3 / tiny_llama)."""
    configs = {"qwen3": tiny_qwen3(), "llama": tiny_llama()}
    return lambda family="qwen3", seed=0: random_model(configs[family], seed)


@pytest.fixture(scope="session")
def qwen3_model(make_model):
    return make_model("qwen3")


@pytest.fixture(scope="session")
def full_logits():
    """full_logits(model, ids, length=64) -> float32 numpy logits [len(ids), V] of one unpadded
    sequence, by a full forward without cache (right-padded to `length` so one compilation serves)."""
    compiled = {}

    def run(model, ids, length: int = 64):
        ids = list(ids)
        assert len(ids) <= length
        graphdef, state = nnx.split(model)
        if graphdef not in compiled:
            compiled[graphdef] = jax.jit(lambda state, t, p: nnx.merge(graphdef, state)(t, p)[0])
        tokens = jnp.asarray([ids + [PAD] * (length - len(ids))], jnp.int32)
        positions = jnp.arange(length)[None]
        return np.asarray(compiled[graphdef](state, tokens, positions)[0, : len(ids)])

    return run
