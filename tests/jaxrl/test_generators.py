"""`jaxrl.generators`: the policy behind the sampler, with the tokenizer's chat rendering."""

from __future__ import annotations

from jaxrl.config import ModelSection, SamplingSection
from jaxrl.generators import TemplatedGenerator, load_generator
from jaxrl.sampling.api import Completion, SamplingParams


def test_templated_generator_renders_with_the_chat_template_and_delegates_generation(tiny_checkpoint):
    from jaxrl.checkpoint import load_tokenizer

    class Echo:
        def generate(self, prompts, params):
            return [[Completion(p.upper(), (), (), "stop")] * params.num_samples for p in prompts]

    generator = TemplatedGenerator(Echo(), load_tokenizer(tiny_checkpoint))
    prompt = generator.render([{"role": "system", "content": "w1"}, {"role": "user", "content": "w2 w3"}])
    assert prompt == "<|system|> w1 <|user|> w2 w3 <|assistant|> "
    out = generator.generate([prompt], SamplingParams(num_samples=2))
    assert [c.text for c in out[0]] == [prompt.upper()] * 2


def test_load_generator_samples_from_the_checkpoint(tiny_checkpoint):
    generator = load_generator(ModelSection(source=str(tiny_checkpoint), attention_impl="reference"),
                               sampling=SamplingSection(batch_size=4, max_prompt_tokens=64))
    prompt = generator.render([{"role": "user", "content": "w1 w2 w3"}])
    out = generator.generate([prompt, prompt], SamplingParams(temperature=1.0, max_new_tokens=5, num_samples=2, seed=3))
    assert [len(samples) for samples in out] == [2, 2]
    for completion in (c for samples in out for c in samples):
        assert 1 <= len(completion.token_ids) <= 5 and len(completion.logprobs) == len(completion.token_ids)
        assert completion.finish_reason in ("stop", "length")
