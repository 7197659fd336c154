"""Sandbox verdicts as rewards: the paper's R_correct and R_speedup, and adapters for TRL and verl.

    R_correct = valid x correct
    R_speedup = valid x correct x min(speedup, speedup_cap)        (speedup_cap = 2.0 by default)

The verdict's `status` decides: a sample scores only when its status is `ok` (checked against `valid`
and `correct`). `timeout` and every other candidate failure score 0. `infra_error`, `reference_error` (the
task's reference is broken) or no result at all say nothing about the candidate: it is reported as unusable,
to be masked out of group statistics rather than scored 0. With `timing_available=False` (the CPU interpreter) every speedup
counts as 1.0. No torch, no NumPy: the trainer and any other framework import this.

Adapters (docs/ecosystem.md has examples):
* `make_reward_function(client=None, ...)`: TRL's `reward_funcs` form, `f(prompts, completions, **columns)`.
* `compute_score(data_source, solution_str, ground_truth, extra_info=None)`: verl's custom reward function.
Both keep the trainer's semantics: a candidate may be a completion with a fenced block or the raw code
(warned about once), the dataset's input sets go with it, speedups count as 1.0 when the sandbox could
not time (the interpreter), and an `infra_error` or `reference_error` (a verdict that does not judge the
candidate) is retried and then never scored as a real 0 (see each adapter for what it becomes).
"""

from __future__ import annotations

import atexit
import dataclasses
import json
import logging
import math
import os
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal

from sandbox_service.options import CandidateFormat, EvalOptions, InputSet
from sandbox_service.results import EvalResult, Status

log = logging.getLogger(__name__)

SandboxResult = Mapping[str, Any] | EvalResult | None


@dataclasses.dataclass(frozen=True)
class RewardConfig:
    """speedup_cap: R_speedup's ceiling (the paper's 2.0). timing_available: False where nothing is timed."""

    speedup_cap: float = 2.0
    timing_available: bool = True

    def __post_init__(self) -> None:
        if not (math.isfinite(self.speedup_cap) and self.speedup_cap > 0):
            raise ValueError(f"speedup_cap must be a positive finite number, got {self.speedup_cap!r}")
        if not isinstance(self.timing_available, bool):
            raise ValueError(f"timing_available must be a bool, got {self.timing_available!r}")

    def metadata(self) -> dict[str, Any]:
        """What a run records about its rewards (states when speedups were not measured)."""
        note = (
            "speedup measured by the sandbox, capped at speedup_cap"
            if self.timing_available
            else "timing unavailable (e.g. CPU interpreter): every speedup counts as 1.0, so R_speedup = R_correct"
        )
        return {"speedup_cap": self.speedup_cap, "timing_available": self.timing_available, "speedup_note": note}


def _as_dict(result: SandboxResult, index: int) -> Mapping[str, Any] | None:
    if result is None:
        return None
    if isinstance(result, EvalResult):
        return result.to_dict()
    if isinstance(result, Mapping):
        return result
    raise TypeError(f"result {index}: expected a dict, an EvalResult or None, got {type(result).__name__}")


def score_result(result: SandboxResult, config: RewardConfig, index: int = 0) -> tuple[float, float, bool]:
    """(R_correct, R_speedup, usable) of one verdict; `index` only labels error messages."""
    data = _as_dict(result, index)
    if data is None:
        return 0.0, 0.0, False
    if "status" not in data:
        raise ValueError(f"result {index}: no 'status' field")
    try:
        status = Status(data["status"])
    except ValueError:
        raise ValueError(f"result {index}: unknown status {data['status']!r}") from None
    if not status.judges_the_candidate:  # infra_error, reference_error
        return 0.0, 0.0, False
    valid, correct = data.get("valid"), data.get("correct")
    if not (isinstance(valid, bool) and isinstance(correct, bool)):
        raise ValueError(f"result {index}: 'valid' and 'correct' must be booleans, got {valid!r} and {correct!r}")
    if status is not Status.OK:
        return 0.0, 0.0, True
    if not (valid and correct):
        raise ValueError(f"result {index}: status 'ok' but valid={valid} correct={correct} (sandbox contract broken)")
    if not config.timing_available:
        return 1.0, min(1.0, config.speedup_cap), True
    speedup = data.get("speedup")
    if speedup is None:
        raise ValueError(
            f"result {index}: correct but not timed (speedup is null); pass RewardConfig(timing_available=False) "
            "when the sandbox cannot time kernels (e.g. the CPU interpreter)"
        )
    speedup = float(speedup)
    if not (math.isfinite(speedup) and speedup > 0):
        raise ValueError(f"result {index}: speedup must be a positive finite number, got {speedup!r}")
    return 1.0, min(speedup, config.speedup_cap), True


def _completion_text(completion: Any) -> str:
    """TRL passes completions as strings, or (conversational datasets) as lists of chat messages."""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, Sequence) and completion and isinstance(completion[-1], Mapping):
        return str(completion[-1].get("content", ""))
    raise TypeError(f"a completion must be a string or a list of chat messages, got {type(completion).__name__}")


def input_sets_of(value: Any) -> tuple[InputSet, ...]:
    """A dataset cell of input sets: None, a list of {name, source} objects (or InputSets), or that list as JSON."""
    if value is None or value == "":
        return ()
    if isinstance(value, str):
        value = json.loads(value)
    if not isinstance(value, Sequence):
        raise TypeError(f"input sets must be a list of {{name, source}} objects, got {type(value).__name__}")
    return tuple(v if isinstance(v, InputSet) else InputSet.from_dict(v) for v in value)


def _is_raw_code(text: str) -> bool:
    return "```" not in text and "class ModelNew" in text


class _RawCodeWarning:
    """Warns once per adapter that candidates without a fenced block are evaluated as the code itself."""

    def __init__(self) -> None:
        self._warned = False

    def check(self, text: str) -> None:
        if not self._warned and _is_raw_code(text):
            self._warned = True
            log.warning("a completion holds no fenced ```python block; it is evaluated as the module itself "
                        "(raw code). Completions with a block are read from their last block.")


def _reward_config(result: SandboxResult, config: RewardConfig | None, timed: bool, cap: float) -> RewardConfig:
    """`config` when given, else timing is available unless nothing was timed by design (time off, or
    the Triton interpreter, which never times)."""
    if config is not None:
        return config
    data = _as_dict(result, 0)
    interpreter = data is not None and data.get("backend") == "interpreter"
    return RewardConfig(speedup_cap=cap, timing_available=timed and not interpreter)


def _score(result: SandboxResult, reward: str, config: RewardConfig | None, timed: bool, cap: float,
           index: int) -> float | None:
    """The chosen reward of one verdict, None when it is unusable (infra_error, reference_error)."""
    r_correct, r_speedup, usable = score_result(result, _reward_config(result, config, timed, cap), index)
    if not usable:
        return None
    return r_correct if reward == "correct" else r_speedup


InfraPolicy = Literal["group_mean", "raise", "none"]


def make_reward_function(
    client=None,
    *,
    reward: str = "correct",
    config: RewardConfig | None = None,
    reference_key: str = "reference",
    input_sets_key: str = "input_sets",
    options: EvalOptions | None = None,
    infra_retries: int = 2,
    on_infra_error: InfraPolicy = "group_mean",
) -> Callable[..., list[float | None]]:
    """A reward function in TRL's form, `f(prompts, completions, **dataset_columns) -> list[float]`.

    client: a `SandboxClient`; None starts a local sandbox server (as `SandboxClient.embedded()`), stopped
    when the process exits (`reward_function.client` is it). Each completion is evaluated against the
    reference source in the dataset column `reference_key`, with the input sets of column `input_sets_key`
    when the dataset has it (a list of {name, source} per row, or that list as JSON): a kernel that
    hard-codes the problem's shapes fails there, as in the trainer. `reward`: "correct" (R_correct) or
    "speedup" (R_speedup). A completion with a fenced block is read from its last block; one without is
    evaluated as the code itself, with a warning the first time. config: None scores like the trainer
    (speedups count as 1.0 where the sandbox does not time, e.g. the interpreter); a RewardConfig fixes it.

    infra_error (the sandbox failed, not the candidate) or reference_error (the row's reference cannot be judged
    against: it raises, times out, is not deterministic...): those samples are evaluated again up to
    `infra_retries` times. What still fails becomes, by `on_infra_error`:
    * "group_mean" (default): the mean reward of the usable samples of the same prompt in this call (0.0
      when none is usable). TRL's advantage is reward minus its group's mean (divided by a std), so such
      a sample gets advantage 0 and no gradient, as the trainer's mask gives it, instead of the negative
      advantage a 0 would earn. (TRL turns None into NaN and then, with one reward function, into 0.)
      Exact when a group's completions reach the function in one call, as they do on one process.
    * "raise": RuntimeError: stop the run rather than train on an unknown.
    * "none": None, for when other reward functions carry the signal for those samples.
    Every call that had to do this logs a warning with the count.
    """
    if reward not in ("correct", "speedup"):
        raise ValueError(f"reward must be 'correct' or 'speedup', got {reward!r}")
    if on_infra_error not in ("group_mean", "raise", "none"):
        raise ValueError(f"on_infra_error must be group_mean, raise or none, got {on_infra_error!r}")
    if infra_retries < 0:
        raise ValueError(f"infra_retries must be >= 0, got {infra_retries}")
    timed = config.timing_available if config is not None else True
    options = options or EvalOptions(candidate_format=CandidateFormat.AUTO, time=timed)
    if client is None:
        from sandbox_service.client import SandboxClient

        client = SandboxClient.embedded()
        atexit.register(client.close)
    raw_code = _RawCodeWarning()

    def reward_function(prompts=None, completions=None, **columns) -> list[float | None]:
        from sandbox_service.client import Pair

        if completions is None or reference_key not in columns:
            raise ValueError(f"needs `completions` and the dataset column {reference_key!r}")
        references = columns[reference_key]
        sets = columns.get(input_sets_key) or [None] * len(completions)
        pairs = []
        for ref, completion, row_sets in zip(references, completions, sets, strict=True):
            text = _completion_text(completion)
            raw_code.check(text)
            pairs.append(Pair(ref, text, options, input_sets_of(row_sets)))
        scores: list[float | None] = [None] * len(pairs)
        pending = list(range(len(pairs)))
        for _ in range(infra_retries + 1):
            results = dict(client.evaluate_many([pairs[i] for i in pending]))
            for slot, index in enumerate(pending):
                scores[index] = _score(results[slot], reward, config, options.time, _cap(config), index)
            pending = [i for i in pending if scores[i] is None]
            if not pending:
                return scores
        return _resolve_infra(scores, pending, prompts, references, on_infra_error)

    reward_function.__name__ = f"sandbox_{reward}_reward"
    reward_function.client = client
    return reward_function


def _cap(config: RewardConfig | None) -> float:
    return (config or RewardConfig()).speedup_cap


def _resolve_infra(scores: list[float | None], failed: list[int], prompts: Sequence[Any] | None,
                   references: Sequence[str], policy: InfraPolicy) -> list[float | None]:
    """Scores for the samples still unjudged after the retries, by `make_reward_function`'s policy."""
    log.warning("%d of %d samples got no verdict on the candidate from the sandbox (infra_error or reference_error) "
                "after retries; on_infra_error=%s", len(failed), len(scores), policy)
    if policy == "raise":
        raise RuntimeError(f"the sandbox could not judge {len(failed)} of {len(scores)} samples "
                           "(infra_error or reference_error)")
    if policy == "none":
        return scores
    groups = [repr((prompts[i] if prompts is not None else None, references[i])) for i in range(len(scores))]
    out = list(scores)
    for index in failed:
        usable = [s for s, g in zip(scores, groups) if g == groups[index] and s is not None]
        out[index] = sum(usable) / len(usable) if usable else 0.0
    return out


# ---------------------------------------------------------------------------------------------- verl

_SHARED: dict[str, Any] = {}
_SHARED_LOCK = threading.Lock()
TARGETS_ENV = "TRITONRL_SANDBOX_TARGETS"


def _shared_client():
    """The process's sandbox client for `compute_score`: the servers of $TRITONRL_SANDBOX_TARGETS
    (host:port, comma-separated), else a local server started on first use and stopped at exit."""
    with _SHARED_LOCK:
        if "client" not in _SHARED:
            from sandbox_service.client import SandboxClient

            targets = [t for t in os.environ.get(TARGETS_ENV, "").split(",") if t.strip()]
            client = SandboxClient(targets) if targets else SandboxClient.embedded()
            atexit.register(client.close)
            _SHARED["client"] = client
        return _SHARED["client"]


def compute_score(
    data_source: str,
    solution_str: str,
    ground_truth: str | Mapping[str, Any],
    extra_info: Mapping[str, Any] | None = None,
    *,
    reward: str = "correct",
    speedup_cap: float = 2.0,
    infra_retries: int = 2,
    client=None,
) -> dict[str, Any]:
    """verl's custom reward function (`custom_reward_function.path` = this file, `name` = compute_score;
    `reward_kwargs` may set `reward`, `speedup_cap`, `infra_retries`).

    ground_truth: the reference source, or a dict with it under "reference" and optionally its
    "input_sets" ([{name, source}] or that list as JSON). solution_str: the decoded response (a fenced
    block, or raw code, warned about once). Returns {"score": R_correct or R_speedup, "correct",
    "speedup_reward", "valid", "status"}; verl logs the extra keys. data_source and extra_info are not
    needed (verl passes them). client: a SandboxClient (None: the shared one, see `_shared_client`).

    infra_error or reference_error is evaluated again `infra_retries` times, then raises RuntimeError: verl's
    reward managers have no per-sample mask, and a 0 would punish the candidate for the sandbox's (or the
    reference's) failure.
    """
    del data_source, extra_info
    if reward not in ("correct", "speedup"):
        raise ValueError(f"reward must be 'correct' or 'speedup', got {reward!r}")
    if isinstance(ground_truth, Mapping):
        reference, sets = ground_truth.get("reference"), input_sets_of(ground_truth.get("input_sets"))
    else:
        reference, sets = ground_truth, ()
    if not isinstance(reference, str) or not reference.strip():
        raise ValueError("ground_truth must be the reference source or a dict with it under 'reference'")
    _VERL_RAW_CODE.check(solution_str)
    client = client or _shared_client()
    options = EvalOptions(candidate_format=CandidateFormat.AUTO)
    for _ in range(infra_retries + 1):
        result = client.evaluate(reference, solution_str, options, input_sets=sets)
        config = _reward_config(result, None, True, speedup_cap)
        r_correct, r_speedup, usable = score_result(result, config)
        if usable:
            return {"score": r_correct if reward == "correct" else r_speedup, "correct": r_correct,
                    "speedup_reward": r_speedup, "valid": float(result.valid), "status": result.status.value}
    raise RuntimeError(f"the sandbox could not judge the sample after {infra_retries + 1} attempts "
                       f"({result.status.value}): {result.error}")


_VERL_RAW_CODE = _RawCodeWarning()
