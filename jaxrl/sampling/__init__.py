"""Sampling from the policy: a batched, jit-compiled KV-cache sampler.

Public API:
    SamplingParams, Completion, TextGenerator          -- api.py (the contract evaluation and GRPO use)
    Sampler, SamplerConfig, params_from_section         -- sampler.py (text in, completions out)
    DecodeEngine, DecodeArgs, DecodeState               -- engine.py (jitted prefill / decode on token arrays)
    length_bucket, batch_bucket                         -- buckets.py
    draw, filter_logits, mode_for, SamplingArgs         -- logits.py (temperature / top-k / top-p / greedy)
    run_sample, expand_aliases, SAMPLE_ALIASES          -- cli.py (`python -m jaxrl.main sample`)
Only api.py is imported eagerly; the rest (which imports jax) loads on first use, so modules that
only need the contract stay cheap to import.
"""

from __future__ import annotations

import importlib
from typing import Any

from jaxrl.sampling.api import Completion, SamplingParams, TextGenerator

_LAZY = {
    "Sampler": "sampler", "SamplerConfig": "sampler", "params_from_section": "sampler",
    "DecodeEngine": "engine", "DecodeArgs": "engine", "DecodeState": "engine",
    "length_bucket": "buckets", "batch_bucket": "buckets",
    "draw": "logits", "filter_logits": "logits", "mode_for": "logits", "SamplingArgs": "logits",
    "run_sample": "cli", "expand_aliases": "cli", "SAMPLE_ALIASES": "cli",
}

__all__ = ["Completion", "SamplingParams", "TextGenerator", *sorted(_LAZY)]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'jaxrl.sampling' has no attribute {name!r}")
    return getattr(importlib.import_module(f"jaxrl.sampling.{module}"), name)
