"""rollouts.jsonl: one record per GRPO sample with its verdict, rewards, advantages and lengths."""

from __future__ import annotations

import numpy as np
import pytest
from grpo_helpers import EOS, ToyTokenizer

from jaxrl.sampling.api import Completion
from jaxrl.training.advantages import AdvantageConfig
from jaxrl.training.grpo import completion_segments, verdict_dict
from jaxrl.training.hrd import RewardModeConfig, sequence_advantages
from jaxrl.training.rewards import RewardConfig, score_results
from jaxrl.training.rollout import Rollout, Task
from jaxrl.training.rollout_log import RolloutLogger, read_rollouts, rollout_records, verdict_fields
from sandbox_service.results import EvalResult, Status, Violation

KERNEL = "<think>plan</think>\n```python\nx = 1\n```"  # 4 plan tokens, 6 code tokens (one per character)
PROSE = "no code here"
CUT = "<think>pl</think>\n```python\ny = 22"  # cut by the length limit: 2 plan tokens, 6 code tokens
LONG_ERROR = "sandbox unavailable: " + "x" * 2000 + " the end"


def completion(text: str, finish_reason: str = "stop") -> Completion:
    tok = ToyTokenizer()
    ids = tuple(tok(text)["input_ids"]) + (EOS,)
    return Completion(text, ids, (0.0,) * len(ids), finish_reason)


def make_rollout() -> Rollout:
    """Two tasks of two samples: a fast correct kernel and prose; an infra failure and no verdict at all."""
    completions = [[completion(KERNEL), completion(PROSE, "length")], [completion(CUT, "length"), completion(KERNEL)]]
    verdicts = [
        [EvalResult(Status.OK, correct=True, valid=True, speedup=3.0, duration_s=1.5),
         EvalResult(Status.FORMAT_ERROR, violations=[Violation("format", "no-code-block", "no python block")])],
        [EvalResult(Status.INFRA_ERROR, error=LONG_ERROR), None],
    ]
    decode = ToyTokenizer().decode
    return Rollout(
        tasks=[Task("level1/19", "q19", "ref"), Task("level1/21", "q21", "ref")],
        prompt_ids=[[5, 6], [7, 8]],
        completions=completions,
        verdicts=[[verdict_dict(v) for v in row] for row in verdicts],
        segments=[[completion_segments(decode, c) for c in row] for row in completions],
        generation_s=0.0,
        scoring_wait_s=0.0,
    )


def score(rollout: Rollout):
    rewards = score_results([v for row in rollout.verdicts for v in row], RewardConfig(timing_available=True),
                            group_size=rollout.group_size)
    plan, code = sequence_advantages(rewards.correct, rewards.speedup, rewards.usable, RewardModeConfig("hrd"),
                                     AdvantageConfig("grpo"))
    return rewards, np.asarray(plan).reshape(-1), np.asarray(code).reshape(-1)


def test_one_record_per_sample_with_its_verdict_rewards_and_advantages():
    rollout = make_rollout()
    rewards, plan, code = score(rollout)
    records = rollout_records(3, rollout, rewards, plan, code)

    assert [(r["step"], r["task"], r["sample"]) for r in records] == [
        (3, "level1/19", 0), (3, "level1/19", 1), (3, "level1/21", 0), (3, "level1/21", 1)]
    assert [r["status"] for r in records] == ["ok", "format_error", "infra_error", None]
    assert [r["usable"] for r in records] == [True, True, False, False]
    assert [r["r_correct"] for r in records] == [1.0, 0.0, 0.0, 0.0]
    assert [r["r_speedup"] for r in records] == [2.0, 0.0, 0.0, 0.0]  # speedup 3.0 capped at 2.0
    assert [r["plan_advantage"] for r in records] == [float(a) for a in plan]
    assert [r["code_advantage"] for r in records] == [float(a) for a in code]
    assert records[0]["code_advantage"] > 0 > records[1]["code_advantage"]
    assert records[2]["code_advantage"] == records[3]["code_advantage"] == 0.0  # masked: no advantage

    fast, prose, infra, missing = records
    assert (fast["valid"], fast["correct"], fast["speedup"], fast["duration_s"]) == (True, True, 3.0, 1.5)
    assert prose["violations"] == ["format/no-code-block: no python block"]
    assert infra["error"].startswith("sandbox unavailable: ") and infra["error"].endswith(" the end")
    assert len(infra["error"]) < 600
    assert all(missing[k] is None for k in ("status", "valid", "correct", "speedup", "error", "violations"))
    lengths = [(r["completion_tokens"], r["plan_tokens"], r["code_tokens"], r["finish_reason"]) for r in records]
    assert lengths == [(40, 4, 6, "stop"), (13, 12, 0, "length"), (35, 2, 6, "length"), (40, 4, 6, "stop")]
    assert all("completion" not in r for r in records)


def test_the_completion_text_is_written_only_with_log_completions(tmp_path):
    rollout = make_rollout()
    for name, log_completions in (("plain", False), ("texts", True)):
        with RolloutLogger(tmp_path / name, log_completions=log_completions) as logger:
            logger.log(1, rollout, *score(rollout))
    assert all("completion" not in r for r in read_rollouts(tmp_path / "plain"))
    assert [r["completion"] for r in read_rollouts(tmp_path / "texts")] == [KERNEL, PROSE, CUT, KERNEL]


def test_a_resumed_run_drops_the_records_of_later_steps(tmp_path):
    rollout = make_rollout()
    scored = score(rollout)
    with RolloutLogger(tmp_path) as logger:
        for step in (1, 2, 3):
            logger.log(step, rollout, *scored)
    with RolloutLogger(tmp_path, start_step=2, log_completions=True) as logger:
        logger.log(3, rollout, *scored)
    records = read_rollouts(tmp_path)
    assert [r["step"] for r in records] == [1] * 4 + [2] * 4 + [3] * 4
    assert ["completion" in r for r in records] == [False] * 8 + [True] * 4  # step 3 is the resumed run's


def test_only_an_enabled_logger_writes(tmp_path):
    rollout = make_rollout()
    with RolloutLogger(tmp_path / "other-process", enabled=False) as logger:
        logger.log(1, rollout, *score(rollout))
    assert not (tmp_path / "other-process").exists()


def test_non_finite_numbers_are_written_as_null():
    fields = verdict_fields({"status": "ok", "valid": True, "correct": True, "speedup": float("inf")})
    assert fields["speedup"] is None


def test_advantages_of_another_rollout_are_refused():
    rollout = make_rollout()
    rewards, plan, code = score(rollout)
    with pytest.raises(ValueError, match="plan_advantage holds 2 values for a rollout of 4 samples"):
        rollout_records(1, rollout, rewards, plan[:2], code)
