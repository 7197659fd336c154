"""End to end with the bundled SmolLM2-135M-Instruct (GGUF weights and tokenizer): the issue's example."""

from __future__ import annotations

import json

import pytest

from jaxrl.config import load_config
from jaxrl.cli.sample import expand_aliases, run_sample


@pytest.mark.slow
def test_bundled_model_completes_a_fact_greedily(capsys):
    overrides = ["model=smollm2-135m", "prompt=The capital of France is", "max_new_tokens=6", "temperature=0",
                 "mesh.fsdp=1"]
    assert run_sample(load_config(None, expand_aliases(overrides)), as_json=True) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["text"].startswith(" Paris"), result["text"]
    assert len(result["token_ids"]) == len(result["logprobs"]) == 6 and result["finish_reason"] == "length"
    assert all(lp <= 0 for lp in result["logprobs"]) and result["logprobs"][0] > -1.0  # a confident first token
