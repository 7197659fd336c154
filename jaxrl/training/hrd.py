"""Hierarchical Reward Decomposition: which tokens are plan and which are code, and what each one learns from.

TritonRL's HRD reinforces the plan (reasoning) with R_speedup and the code with R_correct, for the
objective alpha x J_plan + J_code (alpha = 0.1). Here that becomes one advantage per token:

    reward_mode "hrd":      PLAN token of a completion with code -> alpha x A(R_speedup);
                            every other token -> A(R_correct)
    reward_mode "uniform":  every token -> A(uniform_beta x R_correct + (1 - uniform_beta) x R_speedup)

where A is the configured group-relative estimator (`advantages.py`), applied to each reward separately.

Segments (`segment_tokens`), from the spans of `sandbox_service.verifier.extraction.extract_completion`,
so that the trainer and the sandbox agree on what the code is:
    PLAN   the token starts inside the plan span (the `<think>` body, or the text before the code block
           when there is no `<think>`);
    CODE   the token starts inside the candidate code block's body (the last fenced Python block). A
           block cut off by the length limit (an opening fence with no closing one) is still the code
           the model was writing: its body runs from the line after the fence to the end of the text;
    OTHER  everything else: `<think>`/`</think>` tags, prose between `</think>` and the block, the fence
           lines, text after the block, earlier blocks, and zero-width tokens (start == end, which fast
           tokenizers give to special tokens such as EOS). Padding is OTHER too.
A token that straddles a boundary belongs where its first character is (its start offset).

The rule for the rest, and why:
  * OTHER tokens take A(R_correct). They are the format (tags, fences, stopping after the block), and a
    format failure zeroes R_correct, so the correctness reward is the one that judges them; J_code is
    also the full-weight term, so nothing outside the plan is trained at a tenth of the strength.
  * A completion with no CODE token at all (no code block, or the length limit hit inside `<think>`)
    gets A(R_correct) on every token, its plan included. The missing code is the whole completion's
    failure; crediting it only through alpha x A(R_speedup) would punish "wrote no code" ten times less
    than "wrote wrong code" and teach the policy to avoid writing code.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from jaxrl.config.schema import GRPOSection, check_bounds, default_of
from jaxrl.training.advantages import AdvantageConfig, compute_advantages
from sandbox_service.verifier.extraction import extract_completion

PLAN, CODE, OTHER = 0, 1, 2


def completion_spans(text: str) -> tuple[tuple[int, int] | None, tuple[int, int] | None]:
    """(plan_span, code_span) of a completion as [start, end) character offsets; None where absent.

    The project's extraction rules, plus one: when the only Python block is unterminated (truncated
    completion), it is closed at the end of the text, so its body counts as code and not as plan.
    """
    extraction = extract_completion(text)
    if extraction.code_span is None and text.count("```") % 2 == 1:
        closed = extract_completion(text + "\n```")
        if closed.code_span is not None:
            extraction = closed
    return _clip(extraction.plan_span, len(text)), _clip(extraction.code_span, len(text))


def _clip(span: tuple[int, int] | None, length: int) -> tuple[int, int] | None:
    """Keep a span inside the original text (the closing fence added above lies past its end)."""
    return None if span is None else (min(span[0], length), min(span[1], length))


def segment_tokens(text: str, offsets: Sequence[tuple[int, int]]) -> np.ndarray:
    """Segment id (PLAN, CODE, OTHER) of each completion token, int8 [len(offsets)].

    `offsets` are the tokens' [start, end) character offsets into `text` (a fast tokenizer's
    `return_offsets_mapping=True`), in token order.
    """
    spans = np.asarray(offsets, dtype=np.int64).reshape(-1, 2) if len(offsets) else np.zeros((0, 2), np.int64)
    starts, ends = spans[:, 0], spans[:, 1]
    bad = (starts < 0) | (ends < starts) | (ends > len(text))
    if bad.any():
        i = int(np.argmax(bad))
        raise ValueError(f"token {i}: offsets {tuple(spans[i])} are not a span of a {len(text)}-character text")
    plan_span, code_span = completion_spans(text)
    segments = np.full(len(spans), OTHER, dtype=np.int8)
    real = ends > starts
    if plan_span is not None:
        segments[real & (starts >= plan_span[0]) & (starts < plan_span[1])] = PLAN
    if code_span is not None:
        segments[real & (starts >= code_span[0]) & (starts < code_span[1])] = CODE
    return segments


@dataclasses.dataclass(frozen=True)
class RewardModeConfig:
    """reward_mode: `hrd` or `uniform`; alpha: HRD's plan weight; uniform_beta: the uniform baseline's mix.

    `uniform_beta` is the paper's beta in r = beta R_correct + (1 - beta) R_speedup (0.3 was its best
    uniform setting); it is not the KL coefficient `beta` of the loss.
    """

    reward_mode: str = default_of(GRPOSection, "reward_mode")
    alpha: float = default_of(GRPOSection, "alpha")
    uniform_beta: float = default_of(GRPOSection, "uniform_beta")

    def __post_init__(self) -> None:
        get_reward_mode(self.reward_mode)
        check_bounds(self, GRPOSection)  # alpha, uniform_beta: declared once, in the schema


# (R_correct, R_speedup, usable, mode config, advantage config) -> (plan advantage, code advantage),
# each [num_groups, G]; the plan advantage already carries its weight.
RewardModeFn = Callable[
    [jax.Array, jax.Array, jax.Array, RewardModeConfig, AdvantageConfig], tuple[jax.Array, jax.Array]
]
REWARD_MODES: dict[str, RewardModeFn] = {}


def register_reward_mode(name: str) -> Callable[[RewardModeFn], RewardModeFn]:
    def register(fn: RewardModeFn) -> RewardModeFn:
        if name in REWARD_MODES:
            raise ValueError(f"reward mode {name!r} is already registered")
        REWARD_MODES[name] = fn
        return fn

    return register


def get_reward_mode(name: str) -> RewardModeFn:
    if name not in REWARD_MODES:
        raise ValueError(f"unknown reward_mode {name!r}; known: {sorted(REWARD_MODES)}")
    return REWARD_MODES[name]


@register_reward_mode("hrd")
def _hrd(r_correct, r_speedup, usable, mode: RewardModeConfig, adv: AdvantageConfig):
    plan = mode.alpha * compute_advantages(r_speedup, usable, adv)
    return plan, compute_advantages(r_correct, usable, adv)


@register_reward_mode("uniform")
def _uniform(r_correct, r_speedup, usable, mode: RewardModeConfig, adv: AdvantageConfig):
    mixed = mode.uniform_beta * jnp.asarray(r_correct) + (1.0 - mode.uniform_beta) * jnp.asarray(r_speedup)
    advantage = compute_advantages(mixed, usable, adv)
    return advantage, advantage


def sequence_advantages(
    r_correct: jax.Array, r_speedup: jax.Array, usable: jax.Array, mode: RewardModeConfig, adv: AdvantageConfig
) -> tuple[jax.Array, jax.Array]:
    """(plan advantage, code advantage), each [num_groups, G], for rewards and usable mask [num_groups, G]."""
    return get_reward_mode(mode.reward_mode)(r_correct, r_speedup, usable, mode, adv)


def token_advantages(segments: jax.Array, plan_advantage: jax.Array, code_advantage: jax.Array) -> jax.Array:
    """Per-token advantages [B, T] from segments [B, T] and per-sequence advantages [B].

    PLAN tokens of a sequence that has at least one CODE token take `plan_advantage`; every other token
    takes `code_advantage` (the module docstring says why).
    """
    segments = jnp.asarray(segments)
    plan_advantage = jnp.asarray(plan_advantage, jnp.float32)
    code_advantage = jnp.asarray(code_advantage, jnp.float32)
    if segments.ndim != 2 or not (plan_advantage.shape == code_advantage.shape == segments.shape[:1]):
        raise ValueError(
            f"segments must be [B, T] and advantages [B]; got {segments.shape}, "
            f"{plan_advantage.shape}, {code_advantage.shape}"
        )
    has_code = jnp.any(segments == CODE, axis=1, keepdims=True)
    is_plan = (segments == PLAN) & has_code
    return jnp.where(is_plan, plan_advantage[:, None], code_advantage[:, None])
