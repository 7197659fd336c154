"""The sandbox as another framework's reward: TRL's `reward_funcs` and verl's `compute_score`, with the
trainer's semantics (raw code read as code, input sets passed through, interpreter runs without timing,
infra_error retried and never scored as a real 0)."""

from __future__ import annotations

import logging

import pytest

from sandbox_cases import CHEAT, CORRECT, INCORRECT, REFERENCE
from sandbox_service.client import SandboxClient
from sandbox_service.options import EvalOptions
from sandbox_service.results import EvalResult, Status
from sandbox_service.reward import compute_score, make_reward_function

TALL = {"name": "tall", "source": "def get_inputs():\n    return [torch.randn(32, N), torch.randn(32, N)]\n"}
HARDCODED = CORRECT.replace("n = a.numel()", "n = 8 * 4096")  # right only for the reference's own shape
FAST = EvalOptions(trials=2)


def fenced(code: str) -> str:
    return f"<think>plan</think>\n```python\n{code}```"


@pytest.mark.slow
def test_without_a_client_it_starts_a_local_sandbox_and_scores_honest_wrong_and_cheating_kernels(caplog):
    reward = make_reward_function()  # no client, no timing_available: the interpreter is handled
    try:
        completions = [fenced(CORRECT), fenced(INCORRECT), [{"role": "assistant", "content": fenced(CHEAT)}]]
        scores = reward(prompts=["p"] * 3, completions=completions, reference=[REFERENCE] * 3)
        assert scores == [1.0, 0.0, 0.0]
        with caplog.at_level(logging.WARNING, logger="sandbox_service.reward"):
            # Raw code (no fenced block) is evaluated as the module itself, with one warning per function.
            assert reward(prompts=["p"] * 2, completions=[CORRECT, CHEAT], reference=[REFERENCE] * 2) == [1.0, 0.0]
        assert sum("no fenced" in r.message for r in caplog.records) == 1
    finally:
        reward.client.close()


def test_speedup_reward_counts_an_untimed_interpreter_run_as_1(server):
    with SandboxClient([server.address]) as client:
        reward = make_reward_function(client, reward="speedup", options=FAST)
        assert reward(prompts=["p"] * 2, completions=[fenced(CORRECT), "no code"], reference=[REFERENCE] * 2) == [1.0, 0.0]


def test_input_sets_from_the_dataset_catch_a_kernel_that_hard_codes_the_shape(server):
    with SandboxClient([server.address]) as client:
        reward = make_reward_function(client, options=FAST)
        rows = {"prompts": ["p"] * 2, "completions": [fenced(HARDCODED), fenced(CORRECT)], "reference": [REFERENCE] * 2}
        assert reward(**rows) == [1.0, 1.0]  # without input sets the hard-coded shape goes unnoticed
        assert reward(**rows, input_sets=[[TALL], [TALL]]) == [0.0, 1.0]


class ScriptedClient:
    """Answers `evaluate_many` from a list of statuses per call (ok / incorrect / infra_error)."""

    def __init__(self, *calls: list[Status]):
        self.calls = list(calls)
        self.asked: list[int] = []

    def evaluate_many(self, pairs):
        pairs = list(pairs)
        statuses = self.calls.pop(0)
        self.asked.append(len(pairs))
        assert len(statuses) == len(pairs)
        for index, status in enumerate(statuses):
            ok = status is Status.OK
            yield index, EvalResult(status, correct=ok, valid=status is not Status.INFRA_ERROR, backend="interpreter")

    def evaluate(self, reference, candidate, options, input_sets=()):
        return dict(self.evaluate_many([None]))[0]


OK, WRONG, INFRA, REF_ERR = Status.OK, Status.INCORRECT, Status.INFRA_ERROR, Status.REFERENCE_ERROR


def test_infra_errors_are_retried_then_given_their_groups_mean_so_their_advantage_is_zero():
    # Group "a": ok, wrong, and one sample the sandbox never judges; group "b": one more, judged on retry.
    client = ScriptedClient([OK, WRONG, INFRA, INFRA], [INFRA, OK], [INFRA])
    reward = make_reward_function(client, infra_retries=2)
    scores = reward(prompts=["a", "a", "a", "b"], completions=["x"] * 4, reference=["r"] * 4)
    assert client.asked == [4, 2, 1]  # only the unjudged samples are sent again
    assert scores == [1.0, 0.0, 0.5, 1.0]  # 0.5 = mean of group a's usable rewards: advantage 0 in TRL


def test_reference_errors_are_masked_like_infra_errors_in_the_trl_adapter():
    # A broken reference says nothing about the candidate: retried, then its group's mean, never a real 0.
    client = ScriptedClient([OK, WRONG, REF_ERR], [REF_ERR])
    reward = make_reward_function(client, infra_retries=1)
    assert reward(prompts=["a"] * 3, completions=["x"] * 3, reference=["r"] * 3) == [1.0, 0.0, 0.5]
    assert client.asked == [3, 1]
    raising = make_reward_function(ScriptedClient([OK, REF_ERR]), infra_retries=0, on_infra_error="raise")
    with pytest.raises(RuntimeError, match="could not judge 1 of 2"):
        raising(prompts=["a", "a"], completions=["x", "y"], reference=["r", "r"])
    masked = make_reward_function(ScriptedClient([REF_ERR, OK]), infra_retries=0, on_infra_error="none")
    assert masked(prompts=["a", "a"], completions=["x", "y"], reference=["r", "r"]) == [None, 1.0]


@pytest.mark.parametrize("policy", ["raise", "none"])
def test_other_infra_error_policies(policy):
    reward = make_reward_function(ScriptedClient([OK, INFRA], [INFRA]), infra_retries=1, on_infra_error=policy)
    if policy == "raise":
        with pytest.raises(RuntimeError, match="could not judge 1 of 2"):
            reward(prompts=["a", "a"], completions=["x", "y"], reference=["r", "r"])
    else:
        assert reward(prompts=["a", "a"], completions=["x", "y"], reference=["r", "r"]) == [1.0, None]


def test_verl_compute_score_on_honest_wrong_cheating_and_hard_coded_kernels(server):
    with SandboxClient([server.address]) as client:
        honest = compute_score("kernelbench", fenced(CORRECT), REFERENCE, client=client)
        assert honest == {"score": 1.0, "correct": 1.0, "speedup_reward": 1.0, "valid": 1.0, "status": "ok"}
        assert compute_score("kernelbench", fenced(INCORRECT), REFERENCE, client=client)["score"] == 0.0
        cheat = compute_score("kernelbench", CHEAT, {"reference": REFERENCE}, client=client)
        assert (cheat["score"], cheat["status"], cheat["valid"]) == (0.0, "cheat", 0.0)
        truth = {"reference": REFERENCE, "input_sets": [TALL]}
        assert compute_score("kernelbench", fenced(HARDCODED), truth, client=client)["status"] == "incorrect"


def test_verl_compute_score_raises_when_the_sandbox_never_answers():
    with pytest.raises(RuntimeError, match="after 2 attempts"):
        compute_score("kernelbench", "x", REFERENCE, infra_retries=1, client=ScriptedClient([INFRA], [INFRA]))
    with pytest.raises(ValueError, match="ground_truth"):
        compute_score("kernelbench", "x", {"code": REFERENCE}, client=ScriptedClient())


def test_verl_compute_score_retries_a_reference_error_and_never_scores_it_0():
    assert compute_score("kernelbench", "x", REFERENCE, infra_retries=1,
                         client=ScriptedClient([REF_ERR], [OK]))["score"] == 1.0
    with pytest.raises(RuntimeError, match=r"after 2 attempts \(reference_error\)"):
        compute_score("kernelbench", "x", REFERENCE, infra_retries=1, client=ScriptedClient([REF_ERR], [REF_ERR]))
