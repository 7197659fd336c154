"""Orbax checkpoints of a sharded TrainState: exact round trip, layouts, retention, asynchronous saves."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxrl import sharding as shd
from jaxrl.config.schema import OptimSection
from jaxrl.models import init_model, tiny_qwen3
from jaxrl.training.checkpointing import Checkpointer
from jaxrl.training.optim import make_optimizer
from jaxrl.training.trainer import abstract_train_state, init_train_state

CONFIG = tiny_qwen3()


@pytest.fixture(scope="module")
def optimizer():
    return make_optimizer(OptimSection(learning_rate=1e-3, weight_decay=0.1), 100)[0]


def mesh8():
    if jax.device_count() < 8:
        pytest.fail("tests/conftest.py should provide 8 fake CPU devices")
    return shd.make_mesh(shd.MeshConfig(data=2, fsdp=2, tensor=2))


def trained_state(optimizer, mesh, seed=0):
    """A state whose every part differs from a fresh one: one update with nonzero gradients."""
    _, state, _ = init_train_state(init_model(CONFIG, seed=seed, mesh=mesh), optimizer, mesh, seed=7)
    grads = jax.tree.map(lambda p: jnp.full(p.shape, 0.01, p.dtype), state.params)
    updates, opt_state = optimizer.update(grads, state.opt_state, state.params)
    params = jax.tree.map(lambda p, u: p + u, state.params, updates)
    return type(state)(step=state.step + 1, params=params, opt_state=opt_state, rng=state.rng)


@pytest.fixture(scope="module")
def sharded_state(optimizer):
    """A trained state on the 8-device mesh; read-only, shared by the tests that save it."""
    return trained_state(optimizer, mesh8())


def assert_trees_equal(a, b):
    assert jax.tree.structure(a) == jax.tree.structure(b)
    for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b)):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))


@pytest.mark.slow
def test_round_trip_restores_every_array_exactly_in_the_target_layout(optimizer, sharded_state, tmp_path):
    mesh = mesh8()
    state = sharded_state
    with Checkpointer(tmp_path) as ckpt:
        assert ckpt.latest_step() is None
        assert ckpt.save(1, state, {"data_position": {"epoch": 0, "index": 4}})
        ckpt.wait()
    with Checkpointer(tmp_path) as ckpt:  # a fresh process would open the folder like this
        _, target, target_shardings = abstract_train_state(CONFIG, optimizer, mesh)
        restored, meta = ckpt.restore(target)
    assert meta == {"data_position": {"epoch": 0, "index": 4}}
    assert_trees_equal(restored, state)
    for array, sharding in zip(jax.tree.leaves(restored), jax.tree.leaves(target_shardings)):
        assert array.sharding.is_equivalent_to(sharding, array.ndim)
    # Adam's moments are sharded like their parameters, not replicated.
    mu = restored.opt_state[1][0].mu  # chain(clip, in_float32(adamw)) -> adamw's scale_by_adam state
    assert mu["embedder"]["embedding"].sharding.spec == restored.params["embedder"]["embedding"].sharding.spec
    assert mu["embedder"]["embedding"].sharding.spec != jax.sharding.PartitionSpec()


def test_restore_onto_another_mesh(optimizer, sharded_state, tmp_path):
    state = sharded_state
    with Checkpointer(tmp_path) as ckpt:
        ckpt.save(3, state, {})
        single = shd.single_device_mesh()
        _, target, _ = abstract_train_state(CONFIG, optimizer, single)
        restored, _ = ckpt.restore(target)
    assert_trees_equal(restored, state)
    assert all(len(x.sharding.device_set) == 1 for x in jax.tree.leaves(restored))


def test_retention_latest_step_and_existing_steps(optimizer, tmp_path):
    mesh = shd.single_device_mesh()
    _, state, _ = init_train_state(init_model(CONFIG, mesh=mesh), optimizer, mesh, seed=0)
    with Checkpointer(tmp_path, max_to_keep=2) as ckpt:
        with pytest.raises(FileNotFoundError, match="no checkpoint"):
            ckpt.restore(state)
        for step in (2, 4, 6):
            assert ckpt.save(step, state, {"step": step})
        assert not ckpt.save(6, state, {"step": 6})  # already there: not overwritten
        assert ckpt.steps() == [4, 6] and ckpt.latest_step() == 6
        _, meta = ckpt.restore(state, step=4)
        assert meta == {"step": 4}
        with pytest.raises(FileNotFoundError, match="step 2"):
            ckpt.restore(state, step=2)
    with pytest.raises(ValueError, match="max_to_keep"):
        Checkpointer(tmp_path, max_to_keep=0)


def test_async_save_keeps_the_values_of_save_time(optimizer, tmp_path):
    """The state passed to save may be donated to the next update right away (as the trainer does)."""
    mesh = shd.single_device_mesh()
    state = trained_state(optimizer, mesh)
    expected = jax.device_get(state)
    bump = jax.jit(lambda s: jax.tree.map(lambda x: x + 1, s), donate_argnums=0)
    with Checkpointer(tmp_path, async_save=True) as ckpt:
        ckpt.save(1, state, {})
        state = bump(state)  # invalidates the saved buffers where donation is supported
        state = bump(state)
        _, target, _ = abstract_train_state(CONFIG, optimizer, mesh)
        restored, _ = ckpt.restore(target)
    assert_trees_equal(restored, expected)
