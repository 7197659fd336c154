"""The command tests reuse the data engine tests' fakes (tests/jaxrl/data/engine/engine_fakes.py) and the sampler
tests' tiny models and tokenizer (tests/jaxrl/sampling/sampler_fixtures.py)."""

import sys
from pathlib import Path

_TESTS = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(_TESTS / "data" / "engine"), str(_TESTS / "sampling")]

from sampler_fixtures import char_tokenizer, make_model, qwen3_model  # noqa: E402, F401 - fixtures
