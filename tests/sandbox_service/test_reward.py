"""The sandbox as another framework's reward function: TRL's calling convention, infra failures as None."""

from __future__ import annotations

from sandbox_cases import CHEAT, CORRECT, INCORRECT, REFERENCE
from sandbox_service.client import RetryPolicy, SandboxClient
from sandbox_service.options import EvalOptions
from sandbox_service.reward import RewardConfig, make_reward_function

NO_TIMING = RewardConfig(timing_available=False)


def fenced(code: str) -> str:
    return f"<think>plan</think>\n```python\n{code}```"


def test_trl_style_reward_function(server):
    with SandboxClient([server.address]) as client:
        reward = make_reward_function(client, reward="correct", config=NO_TIMING, options=EvalOptions(trials=2))
        completions = [fenced(CORRECT), fenced(INCORRECT), [{"role": "assistant", "content": fenced(CHEAT)}], "no code"]
        scores = reward(prompts=["p"] * 4, completions=completions, reference=[REFERENCE] * 4)
    assert scores == [1.0, 0.0, 0.0, 0.0]


def test_unjudged_samples_are_none_not_zero():
    with SandboxClient(["127.0.0.1:1"], retry=RetryPolicy(attempts=1), timeout_s=3) as client:
        reward = make_reward_function(client, reward="speedup", config=NO_TIMING)
        assert reward(prompts=["p"], completions=[fenced(CORRECT)], reference=[REFERENCE]) == [None]
