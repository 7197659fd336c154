"""Rewards from sandbox verdicts: R_correct, capped R_speedup, and infrastructure failures masked, not zeroed."""

from __future__ import annotations

import json

import numpy as np
import pytest

from jaxrl.training.rewards import RewardConfig, score_result, score_results
from sandbox_service.results import EvalResult, Status

FAILURES = ["incorrect", "cheat", "format_error", "compile_error", "runtime_error", "timeout"]


def verdict(status: str, valid: bool = False, correct: bool = False, speedup: float | None = None) -> dict:
    return {"status": status, "valid": valid, "correct": correct, "speedup": speedup}


def test_ok_scores_one_and_the_capped_speedup():
    config = RewardConfig()
    assert score_result(verdict("ok", True, True, 1.37), config) == pytest.approx((1.0, 1.37, True))
    assert score_result(verdict("ok", True, True, 0.4), config) == pytest.approx((1.0, 0.4, True))
    assert score_result(verdict("ok", True, True, 3.5), config) == (1.0, 2.0, True)
    assert score_result(verdict("ok", True, True, 3.5), RewardConfig(speedup_cap=3.0)) == (1.0, 3.0, True)


@pytest.mark.parametrize("status", FAILURES)
def test_every_candidate_failure_scores_zero_and_stays_in_the_statistics(status):
    # Even a verdict whose flags say valid and correct (e.g. a timeout after correctness passed) scores 0.
    for flags in [(False, False), (True, False), (True, True)]:
        assert score_result(verdict(status, *flags, speedup=1.5), RewardConfig()) == (0.0, 0.0, True)


def test_infrastructure_failures_and_broken_references_are_masked_not_scored():
    assert score_result(verdict("infra_error"), RewardConfig()) == (0.0, 0.0, False)
    assert score_result(verdict("reference_error", True), RewardConfig()) == (0.0, 0.0, False)  # the task's fault
    assert score_result(None, RewardConfig()) == (0.0, 0.0, False)  # no verdict at all (sandbox unreachable)


def test_untimed_correct_sample_is_an_error_unless_timing_is_declared_unavailable():
    with pytest.raises(ValueError, match="timing_available=False"):
        score_result(verdict("ok", True, True, None), RewardConfig())
    untimed = RewardConfig(timing_available=False)
    assert score_result(verdict("ok", True, True, None), untimed) == (1.0, 1.0, True)
    # Without timing every speedup counts as 1, so a group never mixes measured and unmeasured samples.
    assert score_result(verdict("ok", True, True, 1.8), untimed) == (1.0, 1.0, True)
    # Incorrect samples are never timed; that is not an error.
    assert score_result(verdict("incorrect", True, False, None), RewardConfig()) == (0.0, 0.0, True)


def test_metadata_states_whether_speedups_were_measured():
    assert RewardConfig().metadata()["timing_available"] is True
    meta = RewardConfig(timing_available=False).metadata()
    assert meta["timing_available"] is False and "1.0" in meta["speedup_note"] and meta["speedup_cap"] == 2.0


@pytest.mark.parametrize(
    "bad, message",
    [
        ({"valid": True, "correct": True}, "no 'status'"),
        (verdict("great", True, True, 1.0), "unknown status"),
        (verdict("ok", False, True, 1.0), "contract"),
        ({"status": "ok", "valid": 1, "correct": True, "speedup": 1.0}, "booleans"),
        (verdict("ok", True, True, -1.0), "positive"),
        (verdict("ok", True, True, float("nan")), "positive"),
        ("ok", "expected a dict"),
    ],
)
def test_malformed_verdicts_are_rejected(bad, message):
    with pytest.raises((ValueError, TypeError), match=message):
        score_result(bad, RewardConfig())


@pytest.mark.parametrize("kwargs", [{"speedup_cap": 0.0}, {"speedup_cap": float("inf")}, {"timing_available": 1}])
def test_bad_config_is_rejected(kwargs):
    with pytest.raises(ValueError):
        RewardConfig(**kwargs)


def test_score_results_accepts_json_dicts_and_eval_results_and_shapes_groups():
    ok = EvalResult(status=Status.OK, valid=True, correct=True, compiled=True, speedup=1.25)
    cheat = EvalResult(status=Status.CHEAT, valid=False, correct=True, compiled=True)
    results = [ok, json.loads(cheat.to_json()), None]
    results += [verdict("ok", True, True, 2.5), verdict("timeout"), verdict("infra_error")]
    batch = score_results(results, RewardConfig(), group_size=3)
    np.testing.assert_array_equal(batch.correct, [[1, 0, 0], [1, 0, 0]])
    np.testing.assert_allclose(batch.speedup, [[1.25, 0, 0], [2.0, 0, 0]])
    np.testing.assert_array_equal(batch.usable, [[True, True, False], [True, True, False]])
    assert batch.correct.dtype == np.float32 and batch.usable.dtype == bool
    assert score_results(results, RewardConfig()).correct.shape == (6,)
    with pytest.raises(ValueError, match="groups of 4"):
        score_results(results, RewardConfig(), group_size=4)


def test_error_messages_name_the_offending_result():
    with pytest.raises(ValueError, match="result 1"):
        score_results([verdict("ok", True, True, 1.0), verdict("ok", True, True, None)], RewardConfig())
