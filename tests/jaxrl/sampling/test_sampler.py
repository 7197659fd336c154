"""The KV-cache sampler against a cache-free reference: greedy tokens, logprobs, left padding and
batching, seeds, top-k. Calls keep to few shape buckets (<= 4 rows, prompts <= 32 tokens, 12 new
tokens) so the file compiles few programs."""

from __future__ import annotations

import numpy as np
import pytest

from jaxrl.sampling import Sampler, SamplerConfig, SamplingParams

PROMPTS = ["def add(a, b):", "x", "import triton\nimport torch\n"]
GREEDY = SamplingParams(temperature=0.0, max_new_tokens=12)
CONFIG = SamplerConfig(max_batch_size=4, min_length_bucket=32)


@pytest.fixture(scope="module")
def sampler(qwen3_model, char_tokenizer):
    """EOS disabled so rows run to max_new_tokens."""
    return Sampler(qwen3_model, char_tokenizer, CONFIG, eos_token_ids=())


@pytest.fixture(scope="module")
def greedy_run(sampler):
    return sampler.generate(PROMPTS, GREEDY)


def _reference_greedy(model, full_logits, prompt_ids, steps):
    """Argmax decoding by recomputing the whole sequence each step (no cache)."""
    ids = list(prompt_ids)
    for _ in range(steps):
        ids.append(int(np.argmax(full_logits(model, ids)[-1])))
    return ids[len(prompt_ids):]


def _log_softmax(x):
    x = x - x.max(-1, keepdims=True)
    return x - np.log(np.exp(x).sum(-1, keepdims=True))


def _completion_logprobs(model, full_logits, prompt_ids, token_ids, temperature=1.0):
    logits = full_logits(model, list(prompt_ids) + list(token_ids))[len(prompt_ids) - 1: -1] / temperature
    return _log_softmax(logits)[np.arange(len(token_ids)), list(token_ids)]


@pytest.mark.parametrize("family", ["qwen3", "llama"])
def test_greedy_equals_argmax_decoding_without_cache(family, sampler, qwen3_model, make_model, char_tokenizer,
                                                     full_logits):
    if family == "qwen3":
        model = qwen3_model
    else:
        model = make_model(family)
        sampler = Sampler(model, char_tokenizer, CONFIG, eos_token_ids=())
    for prompt, (completion,) in zip(PROMPTS, sampler.generate(PROMPTS, GREEDY)):
        prompt_ids = sampler.encode(prompt)
        assert list(completion.token_ids) == _reference_greedy(model, full_logits, prompt_ids, 12), prompt
        assert completion.finish_reason == "length"
        assert completion.text == char_tokenizer.decode(list(completion.token_ids), skip_special_tokens=True)
        expected = _completion_logprobs(model, full_logits, prompt_ids, completion.token_ids)
        np.testing.assert_allclose(completion.logprobs, expected, atol=2e-4)  # greedy: the T = 1 logprob


def test_sampled_logprobs_are_the_tempered_policy(sampler, qwen3_model, full_logits):
    params = SamplingParams(temperature=0.8, top_p=0.9, top_k=20, max_new_tokens=12, num_samples=2, seed=3)
    for prompt, completions in zip(PROMPTS[:2], sampler.generate(PROMPTS[:2], params)):
        prompt_ids = sampler.encode(prompt)
        for completion in completions:
            expected = _completion_logprobs(qwen3_model, full_logits, prompt_ids, completion.token_ids, 0.8)
            np.testing.assert_allclose(completion.logprobs, expected, atol=2e-4)


def test_batching_and_left_padding_do_not_change_any_row(sampler, qwen3_model, char_tokenizer, greedy_run):
    """Prompts of different lengths, left-padded into one batch, give what each gives in a batch of its own."""
    one_row = Sampler(qwen3_model, char_tokenizer, SamplerConfig(max_batch_size=1, min_length_bucket=32),
                      eos_token_ids=())
    for i, prompt in enumerate(PROMPTS):
        assert one_row.generate([prompt], GREEDY)[0][0].token_ids == greedy_run[i][0].token_ids
    params = SamplingParams(temperature=1.0, max_new_tokens=12, seed=11)
    together, alone = sampler.generate(PROMPTS, params), one_row.generate(PROMPTS, params)
    for (batched_row,), (single_row,) in zip(together, alone):
        assert batched_row.token_ids == single_row.token_ids
        np.testing.assert_allclose(batched_row.logprobs, single_row.logprobs, atol=1e-5)


def test_seeds_are_reproducible_and_distinct(sampler):
    params = SamplingParams(temperature=1.0, max_new_tokens=12, num_samples=3, seed=5)
    first, again = sampler.generate(PROMPTS[:1], params), sampler.generate(PROMPTS[:1], params)
    assert first == again
    other = sampler.generate(PROMPTS[:1], SamplingParams(temperature=1.0, max_new_tokens=12, num_samples=3, seed=6))
    assert [c.token_ids for c in first[0]] != [c.token_ids for c in other[0]]
    assert len({c.token_ids for c in first[0]}) == 3  # the samples of one prompt differ from each other


def test_top_k_one_is_greedy(sampler, greedy_run):
    top1 = sampler.generate(PROMPTS, SamplingParams(temperature=1.0, top_k=1, max_new_tokens=12, seed=9))
    for (a,), (b,) in zip(top1, greedy_run):
        assert a.token_ids == b.token_ids
        np.testing.assert_allclose(a.logprobs, b.logprobs, atol=1e-5)  # T = 1: the same logprob
