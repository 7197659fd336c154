"""GRPO with Hierarchical Reward Decomposition: the rollout, the batch it becomes, the loss and the loop.

One step of `GRPOLoop.run`:
    tasks (BatchOrder over the task set, `tasks_per_step` of them)
      -> sample G completions per task with the current parameters (the sampler and the trainer share
         the same arrays: after each update `sampler.update_model(model_from_state(...))`, no copy)
      -> each batch of completions goes to the scorer as soon as it is generated; the sandbox works
         while the sampler produces the next batch (`Scorer.submit` returns a Future)
      -> per-token segments (PLAN / CODE / OTHER, `hrd.segment_tokens`) from character offsets
         obtained by incremental decoding (`token_offsets`), on a host thread during generation
      -> rewards (`rewards.score_results`), usable mask (infra failures are unusable: zero advantage,
         zero loss weight, left out of every group statistic), HRD per-token advantages
      -> one record per sample (verdict, rewards, advantages, lengths) to rollouts.jsonl via RolloutLogger
      -> dynamic sampling (`dynamic_sampling`): groups whose advantages are all zero (every usable sample
         got the same reward, so they carry no gradient) are dropped and more tasks are sampled, up to
         `max_sampling_rounds` rollouts, until `tasks_per_step` groups with a signal are kept
      -> old logprobs recomputed with the current parameters before the update (one extra forward), at the
         sampling temperature: the policy that is trained is softmax(logits / T), the one that sampled
      -> `num_iterations` optimizer updates (TrainStep: exact gradient accumulation over micro-batches)
      -> metrics (JSONL + TensorBoard via MetricsLogger, and the progress bar) -> checkpoint. The
         trust-region metrics (ratio, clip fraction, approx-KL) are means over every update of the step (and
         `_max` over updates): the first update's ratio is 1 by construction and says nothing.

Sampling for training is at temperature T > 0 with no top-k and no top-p: the loss's logprobs are those of
the full tempered distribution, and a truncated sampler would be another policy (its off-support tokens have
no logprob to correct). The loop refuses the other settings instead of training the wrong policy.

Several processes (one per host, `jaxrl.distributed`): process 0 alone scores, and its verdicts are
broadcast to the others (`multihost.broadcast_json`), so every process trains on the same rewards and
the sandbox sees each completion once. Everything else a process computes on its host is already the
same everywhere: completions come from one sampler program over the global mesh whose rows every
process gathers, task order from a seeded RNG, segments from the tokenizer.

Training rows: one sequence per row, `prompt + completion` right-padded to a multiple of
`row_multiple`; `targets[t] = tokens[t + 1]` and `mask[t]` is 1 where targets[t] is a completion token
of a usable sample. Rows of padding (to fill a micro-batch) have mask 0 and count for nothing.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Protocol

import jax
import numpy as np
import optax
from flax import nnx
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P
from tqdm import tqdm

from jaxrl.config.schema import CheckpointSection, GRPOSection, check_bounds
from jaxrl.sampling.api import Completion, SamplingParams
from jaxrl.training.advantages import AdvantageConfig
from jaxrl.training.checkpointing import Checkpointer
from jaxrl.training.hrd import CODE, PLAN, RewardModeConfig, segment_tokens, sequence_advantages, token_advantages
from jaxrl.training.logprobs import token_logprobs, token_logprobs_and_entropy
from jaxrl.training.losses import LossConfig, LossOutput, policy_loss, summarize_metrics
from jaxrl.training.metrics_log import MetricsLogger, to_number
from jaxrl.training.multihost import broadcast_json
from jaxrl.training.rewards import RewardConfig, SpeedupGuard, guard_speedups, score_results
from jaxrl.training.rollout import Rollout, Task
from jaxrl.training.rollout_log import RolloutLogger
from jaxrl.training.sft import BatchOrder, DataPosition
from jaxrl.training.trainer import LossFn, TrainState, TrainStep, model_from_state
from sandbox_service.client import SandboxClient
from sandbox_service.options import EvalOptions
from sandbox_service.results import EvalResult, Status, Violation

log = logging.getLogger(__name__)


# ---------------------------------------------------------------------------------------------- scorers


class Scorer(Protocol):
    """Evaluates one completion; the Future resolves to an EvalResult, a verdict dict (the fields of
    `sandbox ... check --json`) or None (no verdict: treated as an infrastructure failure)."""

    def submit(self, task: Task, completion: Completion) -> Future: ...


class FunctionScorer:
    """A synchronous `fn(task, completion) -> verdict` as a Scorer (tests, synthetic rewards)."""

    def __init__(self, fn: Callable[[Task, Completion], Any]):
        self.fn = fn

    def submit(self, task: Task, completion: Completion) -> Future:
        future: Future = Future()
        try:
            future.set_result(self.fn(task, completion))
        except Exception as exc:  # noqa: BLE001 - surfaced by future.result()
            future.set_exception(exc)
        return future


class SandboxScorer:
    """Scores completions through a SandboxClient on a thread pool (requests overlap generation).

    A request that raises becomes an `infra_error` verdict (unusable), never a zero reward; an empty
    completion is a format failure without a request (the sandbox refuses empty sources).
    """

    def __init__(self, client: SandboxClient, options: EvalOptions, max_concurrency: int):
        self.client = client
        self.options = options
        self._pool = ThreadPoolExecutor(max_workers=max_concurrency, thread_name_prefix="grpo-sandbox")

    def submit(self, task: Task, completion: Completion) -> Future:
        return self._pool.submit(self._evaluate, task, completion)

    def _evaluate(self, task: Task, completion: Completion) -> EvalResult:
        if not completion.text.strip():
            return EvalResult(Status.FORMAT_ERROR, violations=[Violation("format", "empty-completion", "empty")])
        try:
            return self.client.evaluate(task.reference, completion.text, self.options, input_sets=task.input_sets,
                                        request_id=task.key)
        except Exception as exc:  # noqa: BLE001 - one failed request is an infra failure, not the run's end
            return EvalResult(Status.INFRA_ERROR, error=f"sandbox request failed: {type(exc).__name__}: {exc}")

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)


def verdict_dict(result: Any) -> dict[str, Any] | None:
    """A verdict as a dict (EvalResult.to_dict(), a dict as is), None for no verdict."""
    if result is None or isinstance(result, dict):
        return result
    return result.to_dict()


# ---------------------------------------------------------------------------------------------- offsets


def token_offsets(decode: Callable[[Sequence[int]], str], token_ids: Sequence[int], text: str
                  ) -> list[tuple[int, int]]:
    """[start, end) character offsets of each token in `text` (the decoded completion) by incremental
    decoding from an anchor: token i ends at L(a) + len(decode(ids[a:i+1])), where a is the last token
    boundary at which the decoded text was complete (no trailing U+FFFD, i.e. no multi-byte character
    split across tokens) and L(a) the length decoded up to it; a moves to i + 1 whenever token i
    completes the text. For byte-level BPE (Qwen, SmolLM2, GPT-2) this equals the exact
    len(decode(ids[:i+1]) less a trailing partial character) at a cost linear in the length: a
    multi-byte character split across tokens belongs to the token that completes it. If the result does not add up to len(decode(ids)) (tokenizers whose decode is not
    concatenative, e.g. SentencePiece's leading-space rule), the exact, quadratic prefix decoding is
    used instead.

    Offsets are clamped into `text` (a stop string may have cut it short of the last tokens) and are
    non-decreasing; special tokens skipped by `decode` have zero width (hrd: OTHER).
    """
    ids = list(token_ids)
    ends: list[int] = []
    anchor, base = 0, 0
    for i in range(len(ids)):
        piece = decode(ids[anchor : i + 1])
        clean = piece.rstrip("\ufffd")
        ends.append(base + len(clean))
        if len(clean) == len(piece):
            anchor, base = i + 1, base + len(piece)
    if ids and ends[-1] != len(decode(ids)):
        ends = [len(decode(ids[: i + 1])) for i in range(len(ids))]
    out, start = [], 0
    for end in ends:
        end = min(max(end, start), len(text))
        out.append((start, end))
        start = end
    return out


# ---------------------------------------------------------------------------------------------- rollout


def collect_rollout(
    generator: Any,
    scorer: Scorer | None,
    tasks: Sequence[Task],
    params: SamplingParams,
    tasks_per_call: int,
) -> Rollout:
    """Generate `params.num_samples` completions per task, `tasks_per_call` tasks per generate call, and
    submit each completion to the scorer as soon as its call returns; then wait for every verdict.

    Only process 0 calls `scorer` (None elsewhere is fine); the others receive its verdicts."""
    scores = jax.process_index() == 0
    if scores and scorer is None:
        raise ValueError("process 0 scores every rollout: it needs a scorer")
    encode = generator.encode
    decode = generator.decode
    prompt_ids = [list(encode(t.prompt)) for t in tasks]
    completions: list[list[Completion]] = []
    futures: list[list[Future]] = []
    segment_futures: list[list[Future]] = []
    generation_s = 0.0
    # Segments are decoded on a host thread while the device generates the next call.
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="grpo-segments") as segmenter:
        for call, start in enumerate(range(0, len(tasks), tasks_per_call)):
            chunk = list(range(start, min(start + tasks_per_call, len(tasks))))
            t0 = time.perf_counter()
            # A distinct seed per call (the caller varies params.seed per step).
            outputs = generator.generate_from_ids([prompt_ids[i] for i in chunk],
                                                  dataclasses.replace(params, seed=params.seed * 1_000_003 + call))
            generation_s += time.perf_counter() - t0
            for i, samples in zip(chunk, outputs):
                if len(samples) != params.num_samples:
                    raise RuntimeError(
                        f"task {tasks[i].key}: {len(samples)} completions, expected {params.num_samples}")
                completions.append(samples)
                futures.append([scorer.submit(tasks[i], c) for c in samples] if scores else [])
                segment_futures.append([segmenter.submit(completion_segments, decode, c) for c in samples])
        segments = [[f.result() for f in row] for row in segment_futures]
    t0 = time.perf_counter()
    verdicts = broadcast_json([[verdict_dict(f.result()) for f in row] for row in futures] if scores else None)
    return Rollout(list(tasks), prompt_ids, completions, verdicts, segments, generation_s, time.perf_counter() - t0)


def completion_segments(decode: Callable[[Sequence[int]], str], completion: Completion) -> np.ndarray:
    """PLAN / CODE / OTHER of each token of a completion (`hrd.segment_tokens`)."""
    return segment_tokens(completion.text, token_offsets(decode, completion.token_ids, completion.text))


def select_groups(rollout: Rollout, groups: Sequence[int]) -> Rollout:
    """The rollout restricted to the groups (task indices) given, in that order."""
    pick = list(groups)
    return Rollout([rollout.tasks[t] for t in pick], [rollout.prompt_ids[t] for t in pick],
                   [rollout.completions[t] for t in pick], [rollout.verdicts[t] for t in pick],
                   [rollout.segments[t] for t in pick], rollout.generation_s, rollout.scoring_wait_s)


def concat_rollouts(rollouts: Sequence[Rollout]) -> Rollout:
    """One rollout holding the groups of all, in order (times add up)."""
    if not rollouts:
        raise ValueError("no rollouts to concatenate")
    return Rollout([t for r in rollouts for t in r.tasks], [p for r in rollouts for p in r.prompt_ids],
                   [c for r in rollouts for c in r.completions], [v for r in rollouts for v in r.verdicts],
                   [g for r in rollouts for g in r.segments], sum(r.generation_s for r in rollouts),
                   sum(r.scoring_wait_s for r in rollouts))


# ---------------------------------------------------------------------------------------------- batch


def build_rows(rollout: Rollout, token_advantage: np.ndarray, usable: np.ndarray, row_multiple: int,
               rows_multiple: int) -> dict[str, np.ndarray]:
    """Training rows (see the module docstring) for every sample of the rollout, task-major.

    token_advantage: per sample a float32 array over its completion tokens; usable: [num_samples] bool.
    The row count is padded to a multiple of `rows_multiple` with rows that count for nothing.
    Each row holds one sequence from slot 0 followed by padding: the layout the loss declares to the
    model (`one_sequence_per_row`), which lets cuDNN attention skip the dense mask.
    """
    flat = rollout.flat()
    lengths = [len(rollout.prompt_ids[t]) + len(rollout.completions[t][g].token_ids) for t, g in flat]
    width = -(-max(lengths) // row_multiple) * row_multiple
    rows = -(-len(flat) // rows_multiple) * rows_multiple
    out = {
        "tokens": np.zeros((rows, width), np.int32),
        "positions": np.zeros((rows, width), np.int32),
        "segment_ids": np.zeros((rows, width), np.int32),
        "targets": np.zeros((rows, width), np.int32),
        "mask": np.zeros((rows, width), np.float32),
        "advantages": np.zeros((rows, width), np.float32),
    }
    for r, (t, g) in enumerate(flat):
        prompt = rollout.prompt_ids[t]
        completion = list(rollout.completions[t][g].token_ids)
        seq = prompt + completion
        n, p = len(seq), len(prompt)
        out["tokens"][r, :n] = seq
        out["positions"][r, :n] = np.arange(n)
        out["segment_ids"][r, :n] = 1
        out["targets"][r, : n - 1] = seq[1:]
        if usable[r] and completion:
            # Position t predicts token t + 1: completion token k is predicted at p - 1 + k.
            out["mask"][r, p - 1 : n - 1] = 1.0
            out["advantages"][r, p - 1 : n - 1] = token_advantage[r]
    return out


def split_micro(rows: dict[str, np.ndarray], micro_batch_rows: int) -> list[dict[str, np.ndarray]]:
    count = len(rows["tokens"])
    return [{k: v[s : s + micro_batch_rows] for k, v in rows.items()} for s in range(0, count, micro_batch_rows)]


# ---------------------------------------------------------------------------------------------- loss


class GRPOLoss:
    """The PPO-clip (+ KL) loss of `losses.policy_loss` on rows built by `build_rows`, with logprobs under
    softmax(logits / temperature) (the sampling temperature); micro-batches hold `old_logprobs` (and
    `ref_logprobs` when the KL term or its report is wanted). The policy's per-token entropy, at the same
    temperature, is reported as the metric `entropy` (no gradient: not an entropy bonus)."""

    def __init__(self, config: LossConfig, logits_chunk: int = 0, temperature: float = 1.0):
        if not temperature > 0:
            raise ValueError(f"the GRPO loss needs a sampling temperature > 0, got {temperature!r}")
        self.config = config
        self.logits_chunk = logits_chunk
        self.temperature = float(temperature)

    def __call__(self, model, batch, rng) -> LossOutput:
        del rng
        logp, entropy = token_logprobs_and_entropy(model, batch["tokens"], batch["positions"], batch["segment_ids"],
                                                   batch["targets"], self.logits_chunk, one_sequence_per_row=True,
                                                   temperature=self.temperature)
        return policy_loss(logp, batch["old_logprobs"], batch["advantages"], batch["mask"], self.config,
                           ref_logprobs=batch.get("ref_logprobs"), entropy=jax.lax.stop_gradient(entropy))


def make_grpo_loss(config: LossConfig, logits_chunk: int = 0, temperature: float = 1.0) -> GRPOLoss:
    """The GRPO loss at the sampling `temperature` (see GRPOLoss)."""
    return GRPOLoss(config, logits_chunk, temperature)


class LogprobFn:
    """Compiled `token_logprobs` of given parameters on a micro-batch (old and reference logprobs), at the
    sampling temperature."""

    def __init__(self, graphdef: nnx.GraphDef, mesh: Mesh, step: TrainStep, logits_chunk: int,
                 temperature: float = 1.0):
        self.mesh = mesh
        self.step = step

        def fn(params, batch):
            model = nnx.merge(graphdef, params)
            return token_logprobs(model, batch["tokens"], batch["positions"], batch["segment_ids"], batch["targets"],
                                  logits_chunk, one_sequence_per_row=True, temperature=temperature)

        self._fn = jax.jit(fn, out_shardings=NamedSharding(mesh, P()))

    def __call__(self, params: Any, batch: dict[str, np.ndarray]) -> np.ndarray:
        with jax.set_mesh(self.mesh):
            return np.asarray(jax.device_get(self._fn(params, self.step.place(batch))))


# ---------------------------------------------------------------------------------------------- loop


@dataclasses.dataclass(frozen=True)
class GRPOSettings:
    """The loop's knobs (the `grpo` config section carries the same names; total_steps is its max_steps and
    checkpoint_every the checkpoint section's every), bounded as the schema declares them."""

    tasks_per_step: int
    micro_batch_rows: int
    total_steps: int
    num_iterations: int = 1
    tasks_per_call: int = 1
    row_multiple: int = 64
    logits_chunk: int = 0
    reuse_sampler_logprobs: bool = False
    log_every: int = 1
    checkpoint_every: int = 0
    seed: int = 0
    dynamic_sampling: bool = False
    max_sampling_rounds: int = 3

    def __post_init__(self) -> None:
        names = ("tasks_per_step", "micro_batch_rows", "num_iterations", "tasks_per_call", "row_multiple", "log_every",
                 "max_sampling_rounds")
        check_bounds(self, GRPOSection, {**{n: n for n in names}, "total_steps": "max_steps"})
        check_bounds(self, CheckpointSection, {"checkpoint_every": "every"})
        if self.logits_chunk < 0:
            raise ValueError(f"logits_chunk must be >= 0, got {self.logits_chunk}")
        if self.logits_chunk and self.row_multiple % self.logits_chunk:
            raise ValueError(f"logits_chunk ({self.logits_chunk}) must divide row_multiple ({self.row_multiple})")


@dataclasses.dataclass
class GRPOLoop:
    """Everything a GRPO run needs besides the state (see the module docstring).

    generator: a `Sampler` (or anything with encode/decode/generate_from_ids/update_model);
    scorer: called on process 0 only (`collect_rollout`), so the other processes may pass None;
    ref_params: frozen reference parameters (pure dict) for the KL term, None when beta = 0;
    speedup_guard: which measured speedups reach R_speedup (`rewards.SpeedupGuard`; default: all).
    """

    settings: GRPOSettings
    step_fn: TrainStep
    generator: Any
    scorer: Scorer | None
    tasks: Sequence[Task]
    sampling: SamplingParams
    loss_config: LossConfig
    advantage_config: AdvantageConfig
    reward_mode: RewardModeConfig
    reward_config: RewardConfig
    schedule: optax.Schedule
    ref_params: Any = None
    speedup_guard: SpeedupGuard = SpeedupGuard()
    checkpointer: Checkpointer | None = None
    logger: MetricsLogger | None = None
    rollout_logger: RolloutLogger | None = None
    progress: bool = True

    def __post_init__(self) -> None:
        if self.loss_config.beta > 0 and self.ref_params is None:
            raise ValueError("beta > 0 needs ref_params (the frozen reference policy)")
        if self.settings.reuse_sampler_logprobs and self.sampling.temperature != 1.0:
            raise ValueError("reuse_sampler_logprobs needs temperature 1 (sampler logprobs are under logits / T)")
        temperature = self.sampling.temperature
        if not temperature > 0 or self.sampling.top_p < 1.0 or self.sampling.top_k > 0:
            raise ValueError(f"GRPO samples at a temperature > 0 with top_p 1 and top_k 0 (got temperature "
                             f"{temperature}, top_p {self.sampling.top_p}, top_k {self.sampling.top_k}): the loss "
                             "trains the full tempered distribution, and a truncated sampler is another policy")
        loss_temperature = getattr(self.step_fn.loss_fn, "temperature", 1.0)
        if loss_temperature != temperature:
            raise ValueError(f"the loss computes logprobs at temperature {loss_temperature} but the sampler samples at "
                             f"{temperature}: build it with make_grpo_loss(..., temperature={temperature})")
        self.order = BatchOrder(len(self.tasks), self.settings.tasks_per_step, self.settings.seed)
        self.logprob_fn = LogprobFn(self.step_fn.graphdef, self.step_fn.mesh, self.step_fn, self.settings.logits_chunk,
                                    temperature)
        mesh_shape = dict(self.step_fn.mesh.shape)
        self.rows_multiple = self.settings.micro_batch_rows
        batch_devices = mesh_shape.get("data", 1) * mesh_shape.get("fsdp", 1)
        if self.settings.micro_batch_rows % batch_devices:
            raise ValueError(f"micro_batch_rows ({self.settings.micro_batch_rows}) must be a multiple of the mesh's "
                             f"batch devices ({batch_devices})")

    def run(self, state: TrainState, position: DataPosition, done_steps: int | None = None
            ) -> tuple[TrainState, DataPosition]:
        """Steps `done_steps` (default: what the optimizer's count implies) to `total_steps`. Checkpoints are
        numbered by GRPO step, which a step without an update still advances."""
        s = self.settings
        step = int(state.step) // s.num_iterations if done_steps is None else done_steps
        bar = tqdm(total=s.total_steps, initial=step, desc="grpo", dynamic_ncols=True,
                   disable=not self.progress or jax.process_index() != 0)
        try:
            while step < s.total_steps:
                state, position, values = self.train_step(state, position, step)
                step += 1
                bar.update(1)
                bar.set_postfix(reward=f"{values['reward/correct_mean']:.3f}", loss=f"{values['train/loss']:.4f}",
                                valid=f"{values['rate/valid']:.2f}", kl=f"{values['train/approx_kl']:.2e}")
                if self.logger is not None and (step % s.log_every == 0 or step == s.total_steps):
                    self.logger.log(step, values)
                due = step == s.total_steps or (s.checkpoint_every and step % s.checkpoint_every == 0)
                if self.checkpointer is not None and due:
                    self.checkpointer.save(step, state,
                                           {"data_position": position.to_dict(), "kind": "grpo", "grpo_step": step})
        finally:
            bar.close()
        if self.checkpointer is not None:
            self.checkpointer.wait()
        return state, position

    def train_step(self, state: TrainState, position: DataPosition, step: int
                   ) -> tuple[TrainState, DataPosition, dict[str, float]]:
        """One rollout (several with dynamic sampling) and its `num_iterations` updates; returns the new state,
        position and metrics."""
        s = self.settings
        started = time.perf_counter()
        self.generator.update_model(model_from_state(self.step_fn.graphdef, state))
        sampled: list[Rollout] = []
        kept: list[tuple[Rollout, list[int]]] = []
        kept_groups = 0
        for round_index in range(s.max_sampling_rounds if s.dynamic_sampling else 1):
            indices, position = self.order.next(position)
            params = dataclasses.replace(self.sampling, seed=self.sampling.seed + step + 7919 * round_index)
            rollout = collect_rollout(self.generator, self.scorer, [self.tasks[i] for i in indices], params,
                                      s.tasks_per_call)
            sampled.append(rollout)
            groups = list(range(len(rollout.tasks)))
            if s.dynamic_sampling:
                plan_adv, code_adv, _ = self._advantages(rollout)
                groups = [t for t in groups if np.any(plan_adv[t] != 0) or np.any(code_adv[t] != 0)]
            groups = groups[: s.tasks_per_step - kept_groups]
            if groups:
                kept.append((rollout, groups))
                kept_groups += len(groups)
            if kept_groups >= s.tasks_per_step:
                break
        seen = concat_rollouts(sampled)
        train = concat_rollouts([select_groups(r, g) for r, g in kept]) if kept else None
        seen_rewards = score_results(guard_speedups([v for row in seen.verdicts for v in row], self.speedup_guard),
                                     self.reward_config, group_size=seen.group_size)
        update: dict[str, float] = {}
        lr = float(self.schedule(int(state.step)))
        t_update = time.perf_counter()
        if train is not None:
            plan_adv, code_adv, rewards = self._advantages(train)
            plan_adv, code_adv = plan_adv.reshape(-1), code_adv.reshape(-1)
            if self.rollout_logger is not None:
                # Before the update, so a step that fails there still leaves its samples on record;
                # numbered as metrics.jsonl numbers the step (the count of steps done after it).
                self.rollout_logger.log(step + 1, train, rewards, plan_adv, code_adv)
            state, update = self._update(state, train, rewards.usable.reshape(-1), plan_adv, code_adv)
        update_s = time.perf_counter() - t_update
        values = self._metrics(seen, seen_rewards, seen_rewards.usable.reshape(-1), update, lr, update_s,
                               time.perf_counter() - started)
        values.update({"dynamic/rounds": float(len(sampled)), "dynamic/groups_sampled": float(len(seen.tasks)),
                       "dynamic/groups_kept": float(kept_groups)})
        return state, position, values

    def _advantages(self, rollout: Rollout) -> tuple[np.ndarray, np.ndarray, Any]:
        """(plan advantages, code advantages) [num_groups, G] and the rewards of a rollout, its untrusted
        speedups counted as 1 (`speedup_guard`)."""
        verdicts = guard_speedups([v for row in rollout.verdicts for v in row], self.speedup_guard)
        rewards = score_results(verdicts, self.reward_config, group_size=rollout.group_size)
        plan_adv, code_adv = sequence_advantages(rewards.correct, rewards.speedup, rewards.usable,
                                                 self.reward_mode, self.advantage_config)
        return np.asarray(plan_adv), np.asarray(code_adv), rewards

    def _update(self, state: TrainState, rollout: Rollout, usable: np.ndarray, plan_adv: np.ndarray,
                code_adv: np.ndarray) -> tuple[TrainState, dict[str, float]]:
        """`num_iterations` updates on the rollout; metrics summed over all of them (then per-token means),
        plus the largest approx-KL and clip fraction of any one update."""
        s = self.settings
        token_adv = []
        for r, (t, j) in enumerate(rollout.flat()):
            seg = rollout.segments[t][j][None, :]
            token_adv.append(np.asarray(token_advantages(seg, plan_adv[r : r + 1], code_adv[r : r + 1]))[0]
                             if seg.shape[1] else np.zeros((0,), np.float32))
        rows = build_rows(rollout, token_adv, usable, s.row_multiple, self.rows_multiple)
        micro = split_micro(rows, s.micro_batch_rows)
        for index, batch in enumerate(micro):
            if s.reuse_sampler_logprobs:
                batch["old_logprobs"] = self._sampler_logprobs(rollout, batch, index)
            else:
                batch["old_logprobs"] = self.logprob_fn(state.params, batch)
            if self.ref_params is not None:
                batch["ref_logprobs"] = self.logprob_fn(self.ref_params, batch)
        per_update = []
        for _ in range(s.num_iterations):
            state, metrics = self.step_fn(state, micro)
            per_update.append({k: to_number(v, k) for k, v in jax.device_get(metrics).items()})
        totals = {k: float(sum(m[k] for m in per_update)) for k in per_update[0]}
        for key in ("loss", "grad_norm", "denominator"):
            totals[key] = totals[key] / len(per_update)
        each = [summarize_metrics({k: m[k] for k in m if k not in ("loss", "grad_norm", "denominator")})
                for m in per_update]
        totals["approx_kl_max"] = max(float(m["approx_kl"]) for m in each)
        totals["clip_fraction_max"] = max(float(m["clip_low"] + m["clip_high"]) for m in each)
        return state, totals

    def _sampler_logprobs(self, rollout: Rollout, batch: dict[str, np.ndarray], index: int) -> np.ndarray:
        out = np.zeros_like(batch["mask"])
        flat = rollout.flat()
        m = self.settings.micro_batch_rows
        for r in range(len(batch["tokens"])):
            k = index * m + r
            if k >= len(flat):
                break
            t, g = flat[k]
            p = len(rollout.prompt_ids[t])
            lp = rollout.completions[t][g].logprobs
            out[r, p - 1 : p - 1 + len(lp)] = lp
        return out

    def _metrics(self, rollout: Rollout, rewards: Any, usable: np.ndarray, update: dict[str, float], lr: float,
                 update_s: float, elapsed: float) -> dict[str, float]:
        verdicts = [v for row in rollout.verdicts for v in row]
        completions = [c for row in rollout.completions for c in row]
        segments = [s for row in rollout.segments for s in row]
        n = len(verdicts)
        statuses = [None if v is None else v.get("status") for v in verdicts]
        ok = np.asarray(usable, bool)
        correct = rewards.correct.reshape(-1)[ok]
        speed = rewards.speedup.reshape(-1)[ok]
        raw_speedups = [v.get("speedup") for v in verdicts if v and v.get("status") == Status.OK.value
                        and v.get("speedup") is not None]
        trusted = [v for v in guard_speedups(verdicts, self.speedup_guard)
                   if v and v.get("status") == Status.OK.value and v.get("speedup") is not None]
        lengths = np.array([len(c.token_ids) for c in completions], np.float64)
        trained = bool(update)
        summary = summarize_metrics({k: update[k] for k in update
                                     if k not in ("loss", "grad_norm", "denominator", "approx_kl_max",
                                                  "clip_fraction_max")}) if trained else {}
        tokens_generated = float(lengths.sum())
        values = {
            "reward/correct_mean": float(correct.mean()) if correct.size else 0.0,
            "reward/correct_std": float(correct.std()) if correct.size else 0.0,
            "reward/speedup_mean": float(speed.mean()) if speed.size else 0.0,
            "reward/speedup_std": float(speed.std()) if speed.size else 0.0,
            "rate/usable": float(ok.mean()),
            "rate/valid": float(np.mean([bool(v and v.get("valid")) for v in verdicts])),
            "rate/correct": float(np.mean([s == Status.OK.value for s in statuses])),
            "rate/cheat": float(np.mean([s == Status.CHEAT.value for s in statuses])),
            "rate/error": float(np.mean([s not in (Status.OK.value, Status.INCORRECT.value, Status.CHEAT.value)
                                         for s in statuses])),
            "rate/infra_error": float(1.0 - ok.mean()),
            "rate/truncated": float(np.mean([c.finish_reason == "length" for c in completions])),
            "speedup/mean_of_correct": float(np.mean(raw_speedups)) if raw_speedups else 0.0,
            "speedup/trusted_share": (float(np.mean([v.get("speedup_trusted", True) for v in trusted]))
                                      if trusted else 0.0),
            "length/response_mean": float(lengths.mean()),
            "length/response_max": float(lengths.max()),
            "length/plan_tokens_mean": float(np.mean([(s == PLAN).sum() for s in segments])),
            "length/code_tokens_mean": float(np.mean([(s == CODE).sum() for s in segments])),
            "train/loss": update.get("loss", 0.0),
            "train/grad_norm": update.get("grad_norm", 0.0),
            "train/lr": lr,
            "train/loss_tokens": update.get("denominator", 0.0),
            "train/pg_loss": float(summary.get("pg_loss", 0.0)),
            "train/ratio_mean": float(summary.get("ratio", 1.0)),
            "train/approx_kl": float(summary.get("approx_kl", 0.0)),
            "train/approx_kl_max": update.get("approx_kl_max", 0.0),
            "train/clip_fraction": float(summary.get("clip_low", 0.0) + summary.get("clip_high", 0.0)),
            "train/clip_fraction_max": update.get("clip_fraction_max", 0.0),
            "train/entropy": float(summary.get("entropy", 0.0)),
            "train/updated": float(trained),
            "time/generation_s": rollout.generation_s,
            "time/sandbox_wait_s": rollout.scoring_wait_s,
            "time/update_s": update_s,
            "time/step_s": elapsed,
            "throughput/generated_tokens_per_s": tokens_generated / max(rollout.generation_s, 1e-9),
            "throughput/update_tokens_per_s": update.get("tokens", 0.0) / max(update_s, 1e-9),
            "samples": float(n),
        }
        if "ref_kl" in summary:
            values["train/ref_kl"] = float(summary["ref_kl"])
        return values
