"""From a config's `model` section to a ready text generator: the policy (`jaxrl.policy`) behind the JAX
KV-cache sampler, with the tokenizer's chat rendering. Importing this module is cheap."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from jaxrl.config import ModelSection, SamplingSection
from jaxrl.data.prompts import Message, render_prompt
from jaxrl.policy import load_model
from jaxrl.sampling.api import Completion, SamplingParams, TextGenerator


class TemplatedGenerator:
    """A TextGenerator plus the tokenizer's chat template, so callers can go from messages to completions."""

    def __init__(self, generator: TextGenerator, tokenizer: Any, **template_kwargs: Any):
        self.generator = generator
        self.tokenizer = tokenizer
        self.template_kwargs = template_kwargs

    def render(self, messages: list[Message]) -> str:
        return render_prompt(self.tokenizer, messages, **self.template_kwargs)

    def generate(self, prompts: Sequence[str], params: SamplingParams) -> list[list[Completion]]:
        return self.generator.generate(prompts, params)


def load_generator(
    section: ModelSection, mesh: Any = None, sampling: SamplingSection | None = None
) -> TemplatedGenerator:
    """The model of `section` behind the JAX KV-cache sampler, with chat rendering.

    sampling: the batch and prompt-length limits the sampler is built for (default: the schema's).
    """
    from jaxrl.sampling import Sampler, SamplerConfig

    model, _, tokenizer = load_model(section, mesh)
    sampler = Sampler(model, tokenizer, SamplerConfig.from_section(sampling or SamplingSection()), mesh=mesh)
    return TemplatedGenerator(sampler, tokenizer)
