"""Sampler stops (stop tokens, EOS, stop strings), compilation per shape bucket, and bad input."""

from __future__ import annotations

import pytest
from flax import nnx

from jaxrl.models import Transformer, tiny_qwen3
from jaxrl.sampling import Sampler, SamplerConfig, SamplingParams

PROMPTS = ["def add(a, b):", "x", "import triton\nimport torch\n"]
GREEDY = SamplingParams(temperature=0.0, max_new_tokens=12)
CONFIG = SamplerConfig(max_batch_size=4, min_length_bucket=32)


@pytest.fixture(scope="module")
def sampler(qwen3_model, char_tokenizer):
    """EOS disabled so rows run to max_new_tokens unless a test asks for stops."""
    return Sampler(qwen3_model, char_tokenizer, CONFIG, eos_token_ids=())


@pytest.fixture(scope="module")
def greedy_run(sampler):
    return sampler.generate(PROMPTS, GREEDY)


def test_stop_token_ends_the_row_and_is_kept(sampler, greedy_run):
    full = greedy_run[0][0]
    position = next(k for k, t in enumerate(full.token_ids) if k >= 3 and t not in full.token_ids[:k])
    stop = full.token_ids[position]
    params = SamplingParams(temperature=0.0, max_new_tokens=12, stop_token_ids=(stop,))
    completion = sampler.generate(PROMPTS, params)[0][0]
    assert completion.token_ids == full.token_ids[: position + 1]
    assert completion.logprobs == pytest.approx(full.logprobs[: position + 1], abs=1e-5)
    assert completion.finish_reason == "stop"


def test_default_stops_are_the_model_and_tokenizer_eos(char_tokenizer, sampler):
    abstract = nnx.eval_shape(lambda: Transformer(tiny_qwen3(eos_token_ids=(5, 7)), rngs=nnx.Rngs(0)))
    assert Sampler(abstract, char_tokenizer).eos_token_ids == (char_tokenizer.eos_token_id, 5, 7)
    # a special EOS stays in token_ids (GRPO trains on it) but not in the text
    assert sampler.decode(sampler.encode("Hi") + [char_tokenizer.eos_token_id]) == "Hi"


@pytest.mark.parametrize("interval", [1, 64])
def test_stop_string_truncates_tokens_and_text(sampler, qwen3_model, char_tokenizer, greedy_run, interval):
    """Checked every step, the decode loop pauses and resumes; every 64 steps, only at the end."""
    if interval != sampler.config.stop_check_interval:
        config = SamplerConfig(max_batch_size=4, min_length_bucket=32, stop_check_interval=interval)
        sampler = Sampler(qwen3_model, char_tokenizer, config, eos_token_ids=())
    texts = [c[0].text for c in greedy_run]
    stop = texts[0][5:8]  # 3 characters; with one token per character the expected cut is exact
    params = SamplingParams(temperature=0.0, max_new_tokens=12, stop_strings=(stop, "\x00never"))
    for text, (full,), (completion,) in zip(texts, greedy_run, sampler.generate(PROMPTS, params)):
        end = text.find(stop)
        if end < 0:
            assert completion == full
            continue
        end += len(stop)
        assert completion.text == text[:end] and completion.text.endswith(stop)
        assert completion.token_ids == full.token_ids[:end] and completion.logprobs == full.logprobs[:end]
        assert completion.finish_reason == "stop"


def test_one_compilation_per_bucket(qwen3_model, char_tokenizer):
    sampler = Sampler(qwen3_model, char_tokenizer, SamplerConfig(max_batch_size=2), eos_token_ids=())
    sampler.generate(["abc", "defgh"], SamplingParams(temperature=0.0, max_new_tokens=6))
    assert sampler.engine.num_compilations() == 2  # one prefill, one decode
    # other lengths in the same buckets, other temperature / p / k in the same mode, other seeds: no compile
    sampler.generate(["abcdefghij", "k"], SamplingParams(temperature=0.0, max_new_tokens=5))
    sampler.generate(["ab", "cd"], SamplingParams(temperature=0.0, max_new_tokens=6, stop_strings=("zz",)))
    assert sampler.engine.num_compilations() == 2  # resumed decoding reuses the same program
    sampler.generate(["abcdefghijkl", "mn"], SamplingParams(temperature=0.5, max_new_tokens=6, seed=1))
    sampler.generate(["xyz", "uvw"], SamplingParams(temperature=1.5, max_new_tokens=6, seed=2))
    assert sampler.engine.num_compilations() == 4  # sampling mode: one more prefill and decode
    sampler.generate(["a" * 20, "b"], SamplingParams(temperature=0.0, max_new_tokens=6))
    assert sampler.engine.num_compilations() == 6  # prompt bucket 32


def test_max_new_tokens_of_one_and_bad_prompts(sampler):
    (completion,) = sampler.generate(["abc"], SamplingParams(temperature=0.0, max_new_tokens=1))[0]
    assert len(completion.token_ids) == 1 and completion.finish_reason == "length"
    with pytest.raises(ValueError, match="empty"):
        sampler.generate([""], GREEDY)
    with pytest.raises(ValueError, match="max_prompt_tokens"):
        sampler.generate(["a" * 5000], GREEDY)
    with pytest.raises(ValueError, match="max_position_embeddings"):
        sampler.generate(["abc"], SamplingParams(max_new_tokens=600))
    with pytest.raises(TypeError, match="sequence"):
        sampler.generate("abc", GREEDY)
