"""Tokenisation of SFT examples, first-fit-decreasing packing, and per-segment attention of packed rows."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx
from sft_helpers import EOS, CharTokenizer, arithmetic_examples

from jaxrl.data.sft_data import SFTExample
from jaxrl.models import init_model, tiny_qwen3
from jaxrl.training.logprobs import token_logprobs
from jaxrl.training.packing import (
    TokenizedExample,
    first_fit_decreasing,
    pack,
    prompt_text,
    split_rows,
    tokenize_example,
)

TOK = CharTokenizer()
FIELDS = ("tokens", "positions", "segment_ids", "targets")


def chat(prompt: str, completion: str) -> SFTExample:
    return SFTExample(completion, messages=({"role": "user", "content": prompt},))


def test_example_is_rendered_prompt_then_completion_then_eos():
    example = chat("hi", "ok")
    assert prompt_text(example, TOK) == "<user>hi<assistant>"
    tokenized = tokenize_example(example, TOK, max_len=100)
    assert tokenized.ids.tolist() == TOK.encode("<user>hi<assistant>") + TOK.encode("ok") + [EOS]
    assert tokenized.prompt_len == len("<user>hi<assistant>")


def test_prerendered_prompt_text_is_used_as_is():
    example = SFTExample("yes", prompt_text="Q? ")
    assert tokenize_example(example, TOK, 100).ids.tolist() == TOK.encode("Q? yes") + [EOS]


def test_overlong_examples_are_dropped_or_their_completion_truncated():
    example = chat("abc", "0123456789")  # prompt 3 + 16 chars, completion 10 + EOS
    prompt_len = len("<user>abc<assistant>")
    assert tokenize_example(example, TOK, prompt_len + 11) is not None
    assert tokenize_example(example, TOK, prompt_len + 10) is None
    cut = tokenize_example(example, TOK, prompt_len + 4, overlong="truncate")
    assert cut.ids.tolist() == TOK.encode("<user>abc<assistant>0123")
    # Nothing of the completion would be left: dropped even when truncating.
    assert tokenize_example(example, TOK, prompt_len, overlong="truncate") is None
    with pytest.raises(ValueError, match="overlong"):
        tokenize_example(example, TOK, 100, overlong="cut")


def test_tokenizer_without_eos_is_refused():
    class NoEos(CharTokenizer):
        eos_token_id = None

    with pytest.raises(ValueError, match="eos_token_id"):
        tokenize_example(chat("a", "b"), NoEos(), 100)


def test_first_fit_decreasing_packs_tightly_and_deterministically():
    bins = first_fit_decreasing([5, 3, 7, 2, 4, 1], capacity=8)
    assert bins == [[2, 5], [0, 1], [3, 4]]  # 7+1, 5+3, 2+4 (ties keep index order)
    assert sorted(i for b in bins for i in b) == list(range(6))
    with pytest.raises(ValueError, match="length"):
        first_fit_decreasing([9], capacity=8)


def test_pack_lays_out_segments_positions_targets_and_completion_mask():
    a = TokenizedExample(np.array([10, 11, 12, 13]), prompt_len=2)  # completion 12, 13
    b = TokenizedExample(np.array([20, 21, 22]), prompt_len=1)  # completion 21, 22
    rows = pack([a, b], seq_len=8)
    assert rows["tokens"].tolist() == [[10, 11, 12, 13, 20, 21, 22, 0]]
    assert rows["segment_ids"].tolist() == [[1, 1, 1, 1, 2, 2, 2, 0]]
    assert rows["positions"].tolist() == [[0, 1, 2, 3, 0, 1, 2, 0]]
    # Position t predicts the next token of its own example; the last token of each predicts nothing.
    assert rows["targets"].tolist() == [[11, 12, 13, 0, 21, 22, 0, 0]]
    assert rows["loss_mask"].tolist() == [[0, 1, 1, 0, 1, 1, 0, 0]]
    # The mask counts exactly the completion tokens of every example.
    assert rows["loss_mask"].sum() == (4 - 2) + (3 - 1)


def test_pack_rounds_rows_up_with_empty_rows_and_splits_into_micro_batches():
    examples = [TokenizedExample(np.arange(1, 7), prompt_len=3) for _ in range(3)]  # 6 tokens each
    rows = pack(examples, seq_len=8, row_multiple=2)
    assert rows["tokens"].shape == (4, 8)
    assert rows["segment_ids"][3].sum() == 0 and rows["loss_mask"][3].sum() == 0
    micro = split_rows(rows, 2)
    assert len(micro) == 2 and all(m["tokens"].shape == (2, 8) for m in micro)
    assert pack([], seq_len=8, row_multiple=2)["tokens"].shape == (2, 8)
    with pytest.raises(ValueError, match="micro-batches"):
        split_rows(rows, 3)


def test_packed_row_computes_every_example_as_if_it_were_alone():
    """Per-segment attention and restarting positions: packing changes no log-probability."""
    graphdef, params = nnx.split(init_model(tiny_qwen3(), seed=1))

    @jax.jit
    def logprobs(rows):
        return token_logprobs(nnx.merge(graphdef, params), *(rows[k] for k in FIELDS))[0]

    examples = [tokenize_example(e, TOK, 64) for e in arithmetic_examples(3)]
    seq_len = sum(len(e) for e in examples) + 5
    rows = pack(examples, seq_len)
    assert rows["tokens"].shape[0] == 1 and rows["segment_ids"].max() == 3
    packed = logprobs(rows)
    for segment, example in enumerate(examples, start=1):
        single = logprobs(pack([example], len(example)))
        where = rows["segment_ids"][0] == segment
        mask = rows["loss_mask"][0][where] > 0
        np.testing.assert_allclose(np.asarray(packed)[where][mask], np.asarray(single)[mask], atol=2e-5, rtol=0)


def test_chunked_logprobs_equal_unchunked_values_and_gradients():
    model = init_model(tiny_qwen3(), seed=2)
    rows = pack([tokenize_example(e, TOK, 64) for e in arithmetic_examples(4)], seq_len=64, row_multiple=2)
    args = [jnp.asarray(rows[k]) for k in FIELDS]
    mask = jnp.asarray(rows["loss_mask"], jnp.float32)
    graphdef, params = nnx.split(model)

    @functools.partial(jax.jit, static_argnums=1)
    def loss(params, chunk):
        return -(token_logprobs(nnx.merge(graphdef, params), *args, chunk=chunk) * mask).sum()

    full, grad_full = jax.value_and_grad(loss)(params, 0)
    chunked, grad_chunked = jax.value_and_grad(loss)(params, 16)
    np.testing.assert_allclose(chunked, full, rtol=1e-6)
    for g1, g2 in zip(jax.tree.leaves(grad_full), jax.tree.leaves(grad_chunked)):
        np.testing.assert_allclose(g2, g1, atol=1e-6, rtol=1e-5)
    with pytest.raises(ValueError, match="divide"):
        token_logprobs(model, *args, chunk=24)
