"""SFT training: it learns, accumulation and sharding change nothing, and a killed run resumes exactly."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from sft_helpers import EXAMPLES, Recorder, setup

from jaxrl import sharding as shd
from jaxrl.models import tiny_llama, tiny_qwen3
from jaxrl.training.checkpointing import Checkpointer
from jaxrl.training.sft import BatchOrder, DataPosition
from jaxrl.training.trainer import abstract_train_state


def one_device():
    return shd.single_device_mesh()


def eight_devices():
    if jax.device_count() < 8:
        pytest.fail("tests/conftest.py should provide 8 fake CPU devices")
    return shd.make_mesh(shd.MeshConfig(data=2, fsdp=2, tensor=2))


def host(tree):
    return jax.tree.map(np.asarray, jax.device_get(tree))


def test_batch_order_is_a_deterministic_permutation_per_epoch():
    order = BatchOrder(num_examples=5, batch_size=2, seed=3)
    assert order.steps_per_epoch == 3
    position, seen = DataPosition(), []
    for _ in range(3):
        indices, position = order.next(position)
        seen += indices.tolist()
    assert sorted(seen) == list(range(5)) and position == DataPosition(1, 0)
    assert seen == order.order(0).tolist() == BatchOrder(5, 2, 3).order(0).tolist()
    assert order.order(1).tolist() != order.order(0).tolist()
    assert order.next(DataPosition(0, 4))[0].tolist() == [order.order(0)[4]]  # last batch is short
    with pytest.raises(ValueError, match="past"):
        order.next(DataPosition(0, 5))


def test_sft_overfits_a_small_set():
    loop, state, position = setup(one_device(), total_steps=60, batch_size=8, micro_batch_rows=8, lr=1e-2)
    loop.eval_batches = [loop.data.rows(range(8), 8)[0]]
    start, _ = loop.eval_loss(state)
    state, _ = loop.run(state, position)
    end, tokens = loop.eval_loss(state)
    losses = loop.logger.losses()
    assert tokens == sum(len(e.completion) + 1 for e in EXAMPLES)  # every completion token and EOS
    assert losses[1] == pytest.approx(start, rel=1e-5)  # the first step's loss is that of the initial model
    assert end < 0.1 * start, (start, end)


def test_the_policy_is_exported_every_export_every_steps_before_the_last():
    loop, state, position = setup(one_device(), total_steps=5)
    exported = []
    loop.export_every, loop.export = 2, lambda step, state: exported.append((step, int(state.step)))
    loop.run(state, position)
    assert exported == [(2, 2), (4, 4)]  # the final policy is the run's own export (hf/)


def test_gradient_accumulation_equals_one_large_batch():
    """4 micro-batches of 1 row and 1 micro-batch of 4 rows: the same loss, gradient and update.

    What the maths guarantees is the same gradient up to float32 summation order (accumulation adds
    the rows in another order). Adam with a tiny eps turns that into anything up to 2 * lr on a weight
    whose gradient is ~0 (its first step is lr * g / (|g| + eps), nearly lr * sign(g)): on some CPUs a
    weight moved 1.6e-6 apart. With eps = 1e-3 the update is a smooth function of the gradient (its
    slope at most lr / eps = 3), so a summation-order difference of ~1e-9 in a gradient moves a weight by
    ~3e-9 per step, far inside the tolerance below, while a wrong accumulation (a missing or doubled
    micro-batch, a mean over the wrong count) moves the gradient norm and the weights by percent.
    """
    runs = {}
    for rows in (1, 4):
        loop, state, position = setup(one_device(), total_steps=2, micro_batch_rows=rows, eps=1e-3)
        state, _ = loop.run(state, position)
        grad_norms = [m["train/grad_norm"] for _, m in loop.logger.records]
        runs[rows] = (loop.logger.losses(), grad_norms, host(state.params))
    assert runs[1][0] == pytest.approx(runs[4][0], rel=1e-6)
    assert runs[1][1] == pytest.approx(runs[4][1], rel=1e-5)
    for a, b in zip(jax.tree.leaves(runs[1][2]), jax.tree.leaves(runs[4][2])):
        np.testing.assert_allclose(a, b, atol=1e-6, rtol=1e-5)


def test_eight_devices_give_the_same_loss_and_update_as_one():
    runs = {}
    for name, mesh in (("one", one_device()), ("eight", eight_devices())):
        # Adam's step g / (sqrt(v) + eps) turns rounding of a ~0 gradient into an O(lr) change; a large
        # eps makes the update a smooth function of the gradient, so summation order cannot flip it.
        loop, state, position = setup(mesh, config=tiny_qwen3(), total_steps=2, micro_batch_rows=4, eps=1e-3)
        state, _ = loop.run(state, position)
        grad_norms = [m["train/grad_norm"] for _, m in loop.logger.records]
        runs[name] = (loop.logger.losses(), grad_norms, host(state.params), host(state.opt_state))
        if name == "eight":
            kernel = state.params["layers"][0]["mlp"]["up_proj"]["kernel"]
            assert len(kernel.sharding.device_set) == 8 and not kernel.sharding.is_fully_replicated
    one, eight = runs["one"], runs["eight"]
    assert one[0] == pytest.approx(eight[0], rel=1e-5)  # step 2's loss also checks step 1's update
    assert one[1] == pytest.approx(eight[1], rel=1e-5)
    for a, b in zip(jax.tree.leaves(one[2:]), jax.tree.leaves(eight[2:])):
        np.testing.assert_allclose(a, b, atol=1e-7, rtol=1e-5)


def test_killed_and_resumed_run_equals_the_uninterrupted_run(tmp_path):
    mesh = one_device()
    # Uninterrupted: 6 steps (1.5 epochs of 8 examples in batches of 4, so the epoch boundary is crossed).
    loop, state, position = setup(mesh)
    final, final_position = loop.run(state, position)
    uninterrupted = loop.logger.losses()

    # Checkpoints every 2 steps; killed right after step 3, one step past its last checkpoint.
    loop, state, position = setup(mesh)
    loop.checkpointer, loop.checkpoint_every = Checkpointer(tmp_path, async_save=True), 2
    loop.logger = Recorder(kill_after=3)
    with pytest.raises(KeyboardInterrupt):
        loop.run(state, position)
    loop.checkpointer.close()

    # A new process: nothing survives but the checkpoint folder.
    loop, _, _ = setup(mesh, init_seed=1)  # other initial weights: the checkpoint must replace them
    checkpointer = Checkpointer(tmp_path)
    _, target, _ = abstract_train_state(tiny_llama(), loop.step_fn.optimizer, mesh)
    state, meta = checkpointer.restore(target)
    assert int(state.step) == 2 and meta["data_position"] == {"epoch": 1, "index": 0}
    loop.checkpointer, loop.checkpoint_every = checkpointer, 2
    resumed, resumed_position = loop.run(state, DataPosition.from_dict(meta["data_position"]))
    checkpointer.close()

    assert resumed_position == final_position
    assert {s: uninterrupted[s] for s in (3, 4, 5, 6)} == loop.logger.losses()
    for a, b in zip(jax.tree.leaves(host(final)), jax.tree.leaves(host(resumed))):
        np.testing.assert_array_equal(a, b)


def test_bfloat16_compute_keeps_float32_parameters_and_optimizer_state():
    mesh = one_device()
    loop32, state32, position = setup(mesh, total_steps=1)
    loop16, state16, _ = setup(mesh, config=tiny_llama(dtype="bfloat16", param_dtype="float32"), total_steps=1)
    state32, _ = loop32.run(state32, position)
    state16, _ = loop16.run(state16, position)
    floats = [x for x in jax.tree.leaves((state16.params, state16.opt_state)) if jnp.issubdtype(x.dtype, jnp.floating)]
    assert all(x.dtype == jnp.float32 for x in floats)
    loss32, loss16 = loop32.logger.losses()[1], loop16.logger.losses()[1]
    assert loss16 == pytest.approx(loss32, rel=2e-2) and loss16 != loss32  # computed in bf16, close to fp32
