"""The sampler tests' fixtures (tests/jaxrl/sampling/sampler_fixtures.py, shared with the `sample` command's tests)."""

from sampler_fixtures import char_tokenizer, full_logits, make_model, qwen3_model  # noqa: F401 - fixtures
