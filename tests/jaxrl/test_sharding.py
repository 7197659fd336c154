"""Mesh construction, spec fitting, and sharded models on the 8 fake CPU devices of tests/conftest.py."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx
from jax.sharding import PartitionSpec as P

from jaxrl import sharding as shd
from jaxrl.checkpoint import export_hf, load_hf_checkpoint
from jaxrl.models import init_cache, init_model, shard_cache, tiny_llama, tiny_qwen3

ATOL = 2e-5


@pytest.fixture(scope="module", autouse=True)
def eight_devices():
    if jax.default_backend() != "cpu":
        pytest.skip("sharding tests use the 8 fake CPU devices of tests/conftest.py")
    if jax.device_count() < 8:
        pytest.fail("tests/conftest.py should provide 8 fake CPU devices (XLA_FLAGS set before jax import)")


def test_mesh_config_resolution():
    assert shd.MeshConfig().resolve(8) == (1, 8, 1)
    assert shd.MeshConfig(data=2, fsdp=-1, tensor=2).resolve(8) == (2, 2, 2)
    assert shd.MeshConfig(data=-1, fsdp=1, tensor=4).resolve(8) == (2, 1, 4)
    assert shd.MeshConfig(1, 1, 1).resolve(1) == (1, 1, 1)
    with pytest.raises(ValueError, match="at most one"):
        shd.MeshConfig(data=-1, fsdp=-1)
    with pytest.raises(ValueError, match="positive"):
        shd.MeshConfig(tensor=0)
    with pytest.raises(ValueError, match="cannot be split"):
        shd.MeshConfig(tensor=3).resolve(8)
    with pytest.raises(ValueError, match="needs 4 devices"):
        shd.MeshConfig(2, 2, 1).resolve(8)


def test_make_mesh_uses_all_devices():
    mesh = shd.make_mesh(shd.MeshConfig(data=2, fsdp=2, tensor=2))
    assert mesh.axis_names == ("data", "fsdp", "tensor") and dict(mesh.shape) == {"data": 2, "fsdp": 2, "tensor": 2}
    assert mesh.devices.size == 8
    assert dict(shd.single_device_mesh().shape) == {"data": 1, "fsdp": 1, "tensor": 1}


def test_fit_spec_drops_missing_and_non_dividing_axes():
    sizes = {"data": 2, "fsdp": 4, "tensor": 2}
    assert shd.fit_spec(P("fsdp", "tensor", None), (64, 4, 32), sizes) == P("fsdp", "tensor")
    assert shd.fit_spec(P("fsdp", "tensor"), (64, 3), sizes) == P("fsdp")  # 3 kv heads over tensor=2
    assert shd.fit_spec(P(("data", "fsdp"), None), (4, 16), sizes) == P("data")  # 4 % (2*4) != 0
    assert shd.fit_spec(P(("data", "fsdp")), (16,), sizes) == P(("data", "fsdp"))
    assert shd.fit_spec(P("expert"), (16,), sizes) == P()
    with pytest.raises(ValueError, match="more entries"):
        shd.fit_spec(P("fsdp", None, None), (8, 8), sizes)


def test_constrain_is_identity_without_a_mesh():
    x = jnp.ones((4, 4))
    assert shd.constrain(x, P("fsdp")) is x


@pytest.fixture(scope="module", params=["qwen3", "llama"])
def checkpoint(request, tmp_path_factory):
    """A random model exported to an HF folder (our own export; parity with torch is tested elsewhere)."""
    config = {"qwen3": tiny_qwen3(), "llama": tiny_llama()}[request.param]
    folder = tmp_path_factory.mktemp(f"ckpt_{request.param}")
    export_hf(init_model(config, seed=3), config, folder)
    return folder


def _inputs(batch=4, length=12):
    tokens = jax.random.randint(jax.random.key(0), (batch, length), 1, 128)
    positions = jnp.broadcast_to(jnp.arange(length), (batch, length))
    mask = jnp.ones((batch, length), jnp.int32).at[1, :3].set(0)
    return tokens, positions, mask


@nnx.jit
def _logits(model, tokens, positions, mask):
    return model(tokens, positions, attention_mask=mask)[0]


def test_sharded_loading_matches_one_device(checkpoint):
    single, config = load_hf_checkpoint(checkpoint)
    mesh = shd.make_mesh(shd.MeshConfig(data=1, fsdp=4, tensor=2))
    sharded, _ = load_hf_checkpoint(checkpoint, mesh=mesh)

    q = sharded.layers[0].attn.q_proj.kernel.get_value()
    assert q.sharding.spec == P("fsdp", "tensor") and q.sharding.mesh.devices.size == 8
    assert q.addressable_shards[0].data.shape == (config.hidden_size // 4, config.num_heads // 2, config.head_dim)
    embedding = sharded.embedder.embedding.get_value()
    assert embedding.addressable_shards[0].data.shape == (config.vocab_size // 2, config.hidden_size // 4)

    tokens, positions, mask = _inputs()
    expected = _logits(single, tokens, positions, mask)
    np.testing.assert_allclose(_logits(sharded, tokens, positions, mask), expected, atol=ATOL)

    batch_spec = P(("data", "fsdp"))
    with jax.set_mesh(mesh):  # activation constraints on, inputs sharded over the batch
        sharded_inputs = [shd.shard_array(x, mesh, batch_spec) for x in (tokens, positions, mask)]
        logits = _logits(sharded, *sharded_inputs)
    np.testing.assert_allclose(logits, expected, atol=ATOL)


def test_init_model_on_a_mesh_matches_unsharded_init():
    config = tiny_qwen3()
    mesh = shd.make_mesh(shd.MeshConfig(data=2, fsdp=2, tensor=2))
    sharded = init_model(config, seed=5, mesh=mesh)
    plain = init_model(config, seed=5)
    down = sharded.layers[1].mlp.down_proj.kernel.get_value()
    assert down.sharding.spec == P("tensor", "fsdp")
    for a, b in zip(jax.tree.leaves(nnx.state(sharded)), jax.tree.leaves(nnx.state(plain))):
        np.testing.assert_array_equal(a, b)
    resharded = shd.shard_model(plain, mesh)
    assert resharded.layers[1].mlp.down_proj.kernel.get_value().sharding.spec == P("tensor", "fsdp")


def test_sharded_cache_decoding_matches_full_forward():
    config = tiny_llama()
    mesh = shd.make_mesh(shd.MeshConfig(data=2, fsdp=2, tensor=2))
    model = init_model(config, seed=1, mesh=mesh)
    tokens, positions, mask = _inputs(batch=4, length=8)
    full = _logits(model, tokens, positions, mask)

    step = nnx.jit(lambda m, t, p, s, c, i: m(t, p, segment_ids=s, cache=c, cache_index=i))
    cache = shard_cache(init_cache(config, 4, 8), config, mesh)
    assert cache.layers[0].k.sharding.spec == P(("data", "fsdp"), None, "tensor")
    with jax.set_mesh(mesh):
        logits, cache = step(model, tokens[:, :5], positions[:, :5], mask[:, :5], cache, 0)
        outputs = [logits]
        for t in range(5, 8):
            logits, cache = step(model, tokens[:, t:t + 1], positions[:, t:t + 1], mask[:, t:t + 1], cache, t)
            outputs.append(logits)
    np.testing.assert_allclose(jnp.concatenate(outputs, axis=1), full, atol=ATOL)
