"""Sampling with the model and cache sharded over the 8 fake CPU devices gives the single-device result."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import PartitionSpec as P

from jaxrl import sharding as shd
from jaxrl.sampling import DecodeArgs, Sampler, SamplerConfig, SamplingParams

PROMPTS = ["def add(a, b):", "x", "import triton\nimport torch\n", "@triton.jit"]
CONFIG = SamplerConfig(max_batch_size=4, min_length_bucket=32, stop_check_interval=4)


@pytest.fixture(scope="module", autouse=True)
def eight_devices():
    if jax.default_backend() != "cpu" or jax.device_count() < 8:
        pytest.skip("uses the 8 fake CPU devices of tests/conftest.py")


@pytest.fixture(scope="module")
def single_device_runs(make_model, char_tokenizer):
    """[(params, completions)] from one device: greedy, nucleus sampling, greedy with a stop string."""
    single = Sampler(make_model("llama", seed=4), char_tokenizer, CONFIG, eos_token_ids=())
    greedy = SamplingParams(temperature=0.0, max_new_tokens=12)
    expected = single.generate(PROMPTS, greedy)
    stop = expected[0][0].text[4:6]
    cases = [SamplingParams(temperature=0.9, top_p=0.95, max_new_tokens=12, seed=2),
             SamplingParams(temperature=0.0, max_new_tokens=12, stop_strings=(stop,))]
    return [(greedy, expected)] + [(params, single.generate(PROMPTS, params)) for params in cases]


@pytest.mark.parametrize("mesh_config", [shd.MeshConfig(data=2, fsdp=2, tensor=2), shd.MeshConfig(fsdp=8)],
                         ids=["2x2x2", "fsdp8"])
def test_sharded_sampling_equals_single_device(mesh_config, single_device_runs, make_model, char_tokenizer):
    mesh = shd.make_mesh(mesh_config)
    sharded_model = shd.shard_model(make_model("llama", seed=4), mesh)
    assert sharded_model.layers[0].mlp.up_proj.kernel.get_value().sharding.mesh.devices.size == 8
    sharded = Sampler(sharded_model, char_tokenizer, CONFIG, mesh=mesh, eos_token_ids=())
    for params, expected in single_device_runs:
        got = sharded.generate(PROMPTS, params)
        for (a,), (b,) in zip(got, expected):
            assert a.token_ids == b.token_ids and a.text == b.text and a.finish_reason == b.finish_reason
            np.testing.assert_allclose(a.logprobs, b.logprobs, atol=1e-4)
    assert any(c.finish_reason == "stop" for (c,) in got)  # the stop-string case did stop rows
    # greedy and nucleus: one prefill + one decode each; resuming after host stop checks reuses them
    assert sharded.engine.num_compilations() == 4


def test_sharded_state_is_split_over_the_batch(make_model, char_tokenizer):
    mesh = shd.make_mesh(shd.MeshConfig(data=2, fsdp=2, tensor=2))
    sampler = Sampler(shd.shard_model(make_model("qwen3"), mesh), char_tokenizer, CONFIG, mesh=mesh)
    tokens = np.ones((4, 16), np.int32)
    args = DecodeArgs.of(0.0, 0, 1.0, [], 8)
    keys = jax.random.split(jax.random.key(0), 4)
    state = sampler.engine.prefill(tokens, np.ones_like(tokens), np.ones(4, bool), keys, args, mode="greedy",
                                   cache_len=32)
    state = sampler.engine.decode(state, 8, args, mode="greedy")
    assert state.cache.layers[0].k.sharding.spec == P(("data", "fsdp"), None, "tensor")
    assert state.tokens.sharding.spec == P(("data", "fsdp"))
    assert int(jnp.max(state.lengths)) == 8 and sampler.engine.num_compilations() == 2
