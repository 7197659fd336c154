"""GRPO loop on a tiny random model with a character tokenizer and synthetic rewards (no sandbox)."""

from __future__ import annotations

import jax
import numpy as np
import pytest

from jaxrl import sharding as shd
from jaxrl.sampling.api import Completion
from jaxrl.training.grpo import FunctionScorer, build_rows, token_offsets
from jaxrl.training.metrics_log import MetricsLogger, read_metrics
from jaxrl.training.rollout import Rollout, Task
from jaxrl.training.rollout_log import RolloutLogger, read_rollouts
from jaxrl.training.sft import DataPosition

from grpo_helpers import EOS, ToyTokenizer, lower_first, make_loop, ok


@pytest.mark.slow
def test_synthetic_reward_rises():
    mesh = shd.single_device_mesh()
    loop, state = make_loop(mesh, FunctionScorer(lower_first), steps=12, lr=2e-2)
    rewards = []
    position = DataPosition()
    for step in range(12):
        state, position, values = loop.train_step(state, position, step)
        rewards.append(values["reward/correct_mean"])
    assert np.mean(rewards[-3:]) > np.mean(rewards[:3]) + 0.3, rewards


def test_ratio_is_one_with_a_single_update():
    """One update a step: its ratio is that of the recomputed old logprobs, exactly 1."""
    mesh = shd.single_device_mesh()
    loop, state = make_loop(mesh, FunctionScorer(lower_first), num_iterations=1)
    _, _, values = loop.train_step(state, DataPosition(), 0)
    assert values["train/ratio_mean"] == pytest.approx(1.0, abs=1e-6)
    assert values["train/approx_kl"] == pytest.approx(0.0, abs=1e-6)
    assert values["train/clip_fraction"] == 0.0
    assert values["train/loss_tokens"] > 0


def test_policy_entropy_is_logged(tmp_path):
    """The policy's mean token entropy is a step metric and a metrics.jsonl field; the random tiny model's
    next-token distributions are nearly uniform over its 128 ids, so it is close to log(128)."""
    mesh = shd.single_device_mesh()
    loop, state = make_loop(mesh, FunctionScorer(lower_first))
    with MetricsLogger(tmp_path, tensorboard=False) as logger:
        loop.logger = logger
        loop.run(state, DataPosition())
    (record,) = read_metrics(tmp_path)
    assert record["train/entropy"] == pytest.approx(np.log(128), abs=0.05)
    assert record["train/entropy"] <= np.log(128) + 1e-5


def test_sampler_logprobs_at_temperature_one_match_the_recompute():
    """reuse_sampler_logprobs (T = 1): the sampler's logprobs are the policy's, so the ratio is 1 too."""
    mesh = shd.single_device_mesh()
    loop, state = make_loop(mesh, FunctionScorer(lower_first), reuse=True)
    _, _, values = loop.train_step(state, DataPosition(), 0)
    assert values["train/ratio_mean"] == pytest.approx(1.0, abs=1e-4)
    assert values["train/approx_kl"] < 1e-6


def test_kl_to_the_frozen_initial_policy():
    """With beta > 0 the reference is the initial policy: KL 0 at the first update, > 0 after it."""
    mesh = shd.single_device_mesh()
    loop, state = make_loop(mesh, FunctionScorer(lower_first), beta=0.1, lr=5e-2)
    state, position, first = loop.train_step(state, DataPosition(), 0)
    _, _, second = loop.train_step(state, position, 1)
    assert first["train/ref_kl"] == pytest.approx(0.0, abs=1e-6)
    assert second["train/ref_kl"] > 1e-4


def test_infra_failures_are_masked(tmp_path):
    """Samples whose verdict is infra_error (or missing) get no advantage, no loss weight, no statistics;
    rollouts.jsonl marks them unusable."""
    calls = []

    def scorer(task, completion):
        calls.append(completion)
        k = len(calls) - 1
        if k % 4 == 0:
            return {"status": "infra_error", "valid": False, "correct": False}
        if k % 4 == 1:
            return None
        return lower_first(task, completion)

    mesh = shd.single_device_mesh()
    loop, state = make_loop(mesh, FunctionScorer(scorer), group=4)
    loop.rollout_logger = RolloutLogger(tmp_path)
    _, _, values = loop.train_step(state, DataPosition(), 0)
    loop.rollout_logger.close()
    assert values["rate/usable"] == 0.5 and values["rate/infra_error"] == 0.5
    records = read_rollouts(tmp_path)
    assert [(r["step"], r["task"], r["sample"]) for r in records] == [(1, f"t{t}", g)
                                                                      for t in range(2) for g in range(4)]
    assert [r["usable"] for r in records] == [k % 4 >= 2 for k in range(8)]
    assert [r["status"] for r in records[:2]] == ["infra_error", None]
    usable = [c for k, c in enumerate(calls) if k % 4 >= 2]
    assert values["train/loss_tokens"] == sum(len(c.token_ids) for c in usable)  # token-mean denominator
    expected = np.mean([lower_first(None, c)["status"] == "ok" for c in usable])
    assert values["reward/correct_mean"] == pytest.approx(expected)  # statistics over usable samples only


def test_unusable_samples_get_no_gradient():
    """Every verdict an infra failure: nothing counts, the loss and the gradient are exactly zero."""
    mesh = shd.single_device_mesh()
    loop, state = make_loop(mesh, FunctionScorer(lambda t, c: None), group=4)
    _, _, values = loop.train_step(state, DataPosition(), 0)
    assert values["rate/usable"] == 0.0
    assert values["train/loss_tokens"] == 0 and values["train/loss"] == 0 and values["train/grad_norm"] == 0


def test_build_rows_masks_unusable_samples():
    comps = [[Completion("ab", (70, 71), (-1.0, -1.0), "length"), Completion("c", (72,), (-1.0,), "length")]]
    rollout = Rollout([Task("t", "q", "r")], [[5, 6, 7]], comps, [[ok(), None]],
                      [[np.array([2, 2]), np.array([2])]], 0.0, 0.0)
    rows = build_rows(rollout, [np.array([0.5, 0.5], np.float32), np.array([9.0], np.float32)],
                      np.array([True, False]), row_multiple=8, rows_multiple=4)
    assert rows["tokens"].shape == (4, 8)
    np.testing.assert_array_equal(rows["tokens"][0, :5], [5, 6, 7, 70, 71])
    np.testing.assert_array_equal(rows["targets"][0, :4], [6, 7, 70, 71])
    np.testing.assert_array_equal(rows["mask"][0], [0, 0, 1, 1, 0, 0, 0, 0])
    np.testing.assert_array_equal(rows["advantages"][0, 2:4], [0.5, 0.5])
    assert rows["mask"][1:].sum() == 0 and rows["advantages"][1:].sum() == 0
    # The layout the loss promises cuDNN (one_sequence_per_row): each row one sequence from slot 0.
    segments = rows["segment_ids"]
    lengths = segments.sum(axis=1)
    np.testing.assert_array_equal(segments, np.arange(8)[None, :] < lengths[:, None])
    np.testing.assert_array_equal(lengths, [5, 4, 0, 0])


def test_token_offsets_by_incremental_decoding():
    tok = ToyTokenizer()
    ids = tok("ab c")["input_ids"] + [EOS]
    assert token_offsets(tok.decode, ids, "ab c") == [(0, 1), (1, 2), (2, 3), (3, 4), (4, 4)]
    # A stop string cut the text short: offsets are clamped into it.
    assert token_offsets(tok.decode, ids, "ab") == [(0, 1), (1, 2), (2, 2), (2, 2), (2, 2)]


def test_token_offsets_with_a_byte_level_tokenizer():
    """SmolLM2's byte-level BPE: offsets tile the text, a split multi-byte character goes to the token
    that completes it, and each end equals the exact prefix decoding."""
    from jaxrl.checkpoint import load_tokenizer
    from jaxrl.policy import resolve_source

    tok = load_tokenizer(resolve_source("smollm2-135m")[1])
    text = "<think>plan: héllo → 世界 🙂</think>\n```python\nx = 1\n```"
    ids = tok(text, add_special_tokens=False)["input_ids"] + [tok.eos_token_id]

    def decode(i):
        return tok.decode(list(i), skip_special_tokens=True)

    offsets = token_offsets(decode, ids, text)
    assert "".join(text[a:b] for a, b in offsets) == text
    assert [b for _, b in offsets] == [len(decode(ids[: i + 1]).rstrip("\ufffd")) for i in range(len(ids))]
    assert offsets[-1][0] == offsets[-1][1]  # EOS: zero width


@pytest.mark.slow
def test_eight_devices_match_one_device():
    """One GRPO step on a data=2 x fsdp=4 mesh gives the loss and parameters of one device."""
    results = []
    for mesh in (shd.single_device_mesh(), shd.make_mesh(shd.MeshConfig(data=2, fsdp=4, tensor=1))):
        loop, state = make_loop(mesh, FunctionScorer(lower_first), group=4, micro_rows=8)
        new_state, _, values = loop.train_step(state, DataPosition(), 0)
        results.append((values, jax.device_get(new_state.params)))
    (v1, p1), (v8, p8) = results
    assert v1["reward/correct_mean"] == v8["reward/correct_mean"]
    assert v8["train/loss"] == pytest.approx(v1["train/loss"], rel=1e-4, abs=1e-6)
    for a, b in zip(jax.tree.leaves(p1), jax.tree.leaves(p8)):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6)


def test_a_resumed_run_does_not_repeat_a_step_that_made_no_update(tmp_path):
    """With dynamic sampling, a step whose groups all have zero advantage makes no update (the optimizer's
    count stays); the checkpoint carries GRPO's own count, so a resumed run goes on after it."""
    import dataclasses

    from jaxrl.training.checkpointing import Checkpointer

    calls = []

    def same_reward(task, completion):
        calls.append(task.key)
        return ok()

    mesh = shd.single_device_mesh()
    loop, state = make_loop(mesh, FunctionScorer(same_reward), steps=1, dynamic=True, rounds=1)
    loop.settings = dataclasses.replace(loop.settings, checkpoint_every=1)
    loop.checkpointer = Checkpointer(tmp_path)
    state, position = loop.run(state, DataPosition())
    assert int(state.step) == 0 and loop.checkpointer.latest_step() == 1
    first_calls = len(calls)

    restored, meta = loop.checkpointer.restore(state)
    loop.settings = dataclasses.replace(loop.settings, total_steps=2)
    loop.run(restored, DataPosition.from_dict(meta["data_position"]), meta["grpo_step"])
    assert len(calls) == 2 * first_calls  # one more step, not two
    assert loop.checkpointer.latest_step() == 2
    loop.checkpointer.close()
