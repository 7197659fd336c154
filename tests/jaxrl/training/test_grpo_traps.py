"""The three GRPO traps of issue 21 and the two additions its recipe needs, each as a specification:

- the trained policy is the sampled one: logprobs (old and new) at the sampling temperature, and a loop
  refuses a loss at another temperature or a truncated (top-p / top-k) sampler;
- trust-region metrics cover every update of a step, not only the first (whose ratio is 1 by construction);
- dynamic sampling drops groups with no signal and refills the batch;
- R_speedup only from trustworthy timings (SpeedupGuard): identical kernels get identical rewards.
"""

from __future__ import annotations

import dataclasses
import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxrl import sharding as shd
from jaxrl.models.config import tiny_llama
from jaxrl.models.transformer import init_model
from jaxrl.sampling.api import SamplingParams
from jaxrl.training.grpo import FunctionScorer, GRPOLoop, build_rows, collect_rollout, make_grpo_loss, split_micro
from jaxrl.training.logprobs import token_logprobs, token_logprobs_and_entropy
from jaxrl.training.rewards import RewardConfig, SpeedupGuard, guard_speedups, score_results
from jaxrl.training.sft import DataPosition

from grpo_helpers import EOS, lower_first, make_loop, ok, wrong


# ------------------------------------------------------------------------------------------- temperature


def test_logprobs_and_entropy_are_those_of_the_tempered_distribution():
    mesh = shd.single_device_mesh()
    model = init_model(tiny_llama(eos_token_ids=(EOS,)), seed=0, mesh=mesh)
    tokens = jnp.asarray(np.random.default_rng(0).integers(3, 100, (2, 16)), jnp.int32)
    positions = jnp.broadcast_to(jnp.arange(16), (2, 16))
    segments = jnp.ones((2, 16), jnp.int32)
    targets = jnp.roll(tokens, -1, axis=1)
    hidden, _ = model.hidden_states(tokens, positions, segment_ids=segments)
    scaled = jax.nn.log_softmax(model.logits(hidden).astype(jnp.float32) / 0.6, axis=-1)
    expected = jnp.take_along_axis(scaled, targets[..., None], axis=-1)[..., 0]
    expected_entropy = -jnp.sum(jnp.exp(scaled) * scaled, axis=-1)
    for chunk in (0, 8):
        logp, entropy = token_logprobs_and_entropy(model, tokens, positions, segments, targets, chunk,
                                                   temperature=0.6)
        np.testing.assert_allclose(logp, expected, atol=1e-4)
        np.testing.assert_allclose(entropy, expected_entropy, atol=1e-4)
    at_one = token_logprobs(model, tokens, positions, segments, targets)
    assert float(jnp.max(jnp.abs(at_one - expected))) > 1e-2  # the temperature changes them
    with pytest.raises(ValueError, match="temperature"):
        token_logprobs(model, tokens, positions, segments, targets, temperature=0.0)


def test_recomputed_old_logprobs_match_the_sampler_at_its_temperature():
    """At T = 0.5 the old logprobs the loop recomputes are the sampler's own (logits / T): ratio 1 at the
    first update, and the loss trains the policy that sampled."""
    mesh = shd.single_device_mesh()
    loop, state = make_loop(mesh, FunctionScorer(lower_first), temperature=0.5, max_new=6)
    params = dataclasses.replace(loop.sampling, seed=3)
    rollout = collect_rollout(loop.generator, loop.scorer, list(loop.tasks), params, 2)
    usable = np.ones(len(rollout.flat()), bool)
    adv = [np.zeros(len(rollout.completions[t][g].token_ids), np.float32) for t, g in rollout.flat()]
    rows = build_rows(rollout, adv, usable, 16, loop.rows_multiple)
    for index, batch in enumerate(split_micro(rows, loop.settings.micro_batch_rows)):
        recomputed = loop.logprob_fn(state.params, batch)
        sampled = loop._sampler_logprobs(rollout, batch, index)
        mask = batch["mask"] > 0
        assert mask.any()
        np.testing.assert_allclose(recomputed[mask], sampled[mask], atol=2e-3)


def test_a_loss_at_another_temperature_or_a_truncated_sampler_is_refused():
    mesh = shd.single_device_mesh()
    loop, _ = make_loop(mesh, FunctionScorer(lower_first), temperature=0.7)
    fields = {f.name: getattr(loop, f.name) for f in dataclasses.fields(GRPOLoop)}
    with pytest.raises(ValueError, match="temperature 1.0 but the sampler samples at 0.7"):
        GRPOLoop(**{**fields, "step_fn": _with_loss(loop.step_fn, make_grpo_loss(loop.loss_config))})
    with pytest.raises(ValueError, match="top_p 1 and top_k 0"):
        GRPOLoop(**{**fields, "sampling": dataclasses.replace(loop.sampling, top_p=0.9)})
    with pytest.raises(ValueError, match="top_p 1 and top_k 0"):
        GRPOLoop(**{**fields, "sampling": dataclasses.replace(loop.sampling, temperature=0.0)})


def _with_loss(step_fn, loss_fn):
    """The same TrainStep object with another loss function (only what the loop checks)."""
    import copy

    other = copy.copy(step_fn)
    other.loss_fn = loss_fn
    return other


# ------------------------------------------------------------------------------------------- trust region


def test_trust_region_metrics_cover_every_update_of_a_step():
    """With 3 updates a step the later ones have moved the policy: approx-KL and the ratio's distance from 1
    are over all updates (> 0), the max over updates is at least the mean; with 1 update they are 0."""
    mesh = shd.single_device_mesh()
    loop, state = make_loop(mesh, FunctionScorer(lower_first), num_iterations=3, lr=5e-2)
    _, _, values = loop.train_step(state, DataPosition(), 0)
    assert values["train/approx_kl"] > 1e-6
    assert values["train/approx_kl_max"] >= values["train/approx_kl"] - 1e-9
    assert values["train/ratio_mean"] != pytest.approx(1.0, abs=1e-6)
    assert values["train/clip_fraction_max"] >= values["train/clip_fraction"]
    loop, state = make_loop(mesh, FunctionScorer(lower_first), num_iterations=1, lr=5e-2)
    _, _, single = loop.train_step(state, DataPosition(), 0)
    assert single["train/approx_kl"] == pytest.approx(0.0, abs=1e-6)
    assert single["train/approx_kl_max"] == pytest.approx(0.0, abs=1e-6)


# ------------------------------------------------------------------------------------------- dynamic sampling


class Capture:
    """A rollout logger that keeps the keys of the groups trained on."""

    def __init__(self):
        self.keys: list[list[str]] = []

    def log(self, step, rollout, rewards, plan_adv, code_adv):
        self.keys.append([t.key for t in rollout.tasks])


def _half_and_half(constant: set[str]):
    """Tasks in `constant` always pass (no variance); the others alternate pass / fail (always variance)."""
    flip = itertools.cycle([True, False])

    def score(task, completion):
        if task.key in constant:
            return ok()
        return ok() if next(flip) else wrong()

    return FunctionScorer(score)


def test_dynamic_sampling_keeps_only_groups_with_a_signal_and_refills_the_batch():
    mesh = shd.single_device_mesh()
    loop, state = make_loop(mesh, _half_and_half({"t0", "t2", "t4"}), tasks=2, task_count=6, dynamic=True,
                            rounds=6, max_new=3)
    loop.rollout_logger = Capture()
    _, _, values = loop.train_step(state, DataPosition(), 0)
    (trained,) = loop.rollout_logger.keys
    assert len(trained) == 2 and set(trained) <= {"t1", "t3", "t5"}
    assert values["dynamic/groups_kept"] == 2
    assert values["dynamic/groups_sampled"] >= 2 and values["dynamic/rounds"] >= 1
    assert values["train/updated"] == 1.0


def test_without_dynamic_sampling_every_group_is_trained_on():
    mesh = shd.single_device_mesh()
    loop, state = make_loop(mesh, _half_and_half({"t0", "t2", "t4"}), tasks=2, task_count=6, max_new=3)
    loop.rollout_logger = Capture()
    _, _, values = loop.train_step(state, DataPosition(), 0)
    assert values["dynamic/rounds"] == 1 and values["dynamic/groups_kept"] == 2
    assert len(loop.rollout_logger.keys[0]) == 2


def test_a_step_with_no_signal_after_every_round_makes_no_update():
    mesh = shd.single_device_mesh()
    loop, state = make_loop(mesh, FunctionScorer(lambda task, completion: ok()), tasks=2, task_count=4,
                            dynamic=True, rounds=2, max_new=3)
    before = jax.tree.map(np.asarray, state.params)
    state, _, values = loop.train_step(state, DataPosition(), 0)
    assert values["dynamic/rounds"] == 2 and values["dynamic/groups_kept"] == 0
    assert values["train/updated"] == 0.0 and values["train/loss_tokens"] == 0.0
    jax.tree.map(np.testing.assert_array_equal, before, jax.tree.map(np.asarray, state.params))


# ------------------------------------------------------------------------------------------- trusted speedups


def _timed(speedup, ref_us):
    return {"status": "ok", "valid": True, "correct": True, "speedup": speedup, "ref_time_us": ref_us}


def test_speedups_of_tasks_too_small_to_time_or_within_the_noise_floor_count_as_one():
    guard = SpeedupGuard(min_ref_time_us=50.0, noise_floor=0.1)
    verdicts = [_timed(1.9, 12.0), _timed(1.06, 400.0), _timed(0.93, 400.0), _timed(1.5, 400.0), _timed(0.5, 400.0),
                {"status": "incorrect", "valid": True, "correct": False, "speedup": None}, None]
    guarded = guard_speedups(verdicts, guard)
    assert [v["speedup"] if v else None for v in guarded] == [1.0, 1.0, 1.0, 1.5, 0.5, None, None]
    assert guarded[0]["speedup_trusted"] is False and guarded[0]["speedup_measured"] == 1.9
    assert "speedup_trusted" not in guarded[3]
    assert verdicts[0]["speedup"] == 1.9  # the verdicts themselves are not changed


def test_identical_kernels_timed_with_noise_get_identical_rewards():
    """Eight byte-identical kernels whose measured speedups jitter by up to 8% (what a shared GPU gives):
    guarded, every R_speedup is the same, so the group has no speedup advantage to hand out."""
    jitter = [1.0, 1.04, 0.95, 1.08, 0.97, 1.02, 0.93, 1.06]
    config = RewardConfig(timing_available=True)
    raw = score_results([_timed(s, 80.0) for s in jitter], config)
    assert np.ptp(raw.speedup) > 0.1  # unguarded, the noise is a reward difference
    guarded = score_results(guard_speedups([_timed(s, 80.0) for s in jitter], SpeedupGuard(20.0, 0.1)), config)
    assert np.ptp(guarded.speedup) == 0.0


def test_the_loop_rewards_only_trusted_speedups():
    """Every sample correct with speedups in the noise: with the guard the groups carry no signal at all, so
    dynamic sampling keeps none; without it the noise would have been trained on."""
    mesh = shd.single_device_mesh()
    jitter = itertools.cycle([1.0, 1.05, 0.94, 1.07])
    scorer = FunctionScorer(lambda task, completion: _timed(next(jitter), 200.0))
    config = RewardConfig(timing_available=True)
    loop, state = make_loop(mesh, scorer, tasks=2, task_count=2, dynamic=True, rounds=1, max_new=3,
                            reward_config=config, guard=SpeedupGuard(20.0, 0.1))
    _, _, values = loop.train_step(state, DataPosition(), 0)
    assert values["dynamic/groups_kept"] == 0 and values["speedup/trusted_share"] == 0.0
    loop, state = make_loop(mesh, scorer, tasks=2, task_count=2, dynamic=True, rounds=1, max_new=3,
                            reward_config=config)
    _, _, unguarded = loop.train_step(state, DataPosition(), 0)
    assert unguarded["dynamic/groups_kept"] == 2
