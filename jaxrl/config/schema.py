"""The typed configuration schema: one frozen dataclass per section, nested in `Config`.

Every section derives from `Section`, whose `__post_init__` coerces each field to its annotated
type (so "0.7" becomes 0.7 and "1,2" becomes (1, 2), from YAML or from the command line alike) and
then runs the section's own `_problems()` checks (range checks through `_at_least`, `_above` and
`_in_range`, whose messages name the key, the allowed range and the value). Adding a section (e.g.
`sft`, `grpo`) means: define a `Section` subclass here, add one field to `Config`, and list its keys
with their defaults in `configs/base.yaml` (a test keeps that file equal to these defaults).

This module imports neither jax nor torch: configs are read by every entry point.
"""

from __future__ import annotations

import dataclasses
import functools
import re
import types
import typing
from typing import Any, Literal

import yaml

from jaxrl.config.yaml_io import load_yaml

DType = Literal["float32", "bfloat16", "float16"]
AttentionImpl = Literal["reference", "fast", "auto"]
RematPolicy = Literal["none", "full", "dots"]
Backend = Literal["auto", "cuda", "interpreter"]
Policy = Literal["strict", "relaxed"]
Split = Literal["train", "rl", "val", "heldout"]
Fallback = Literal["generated"]
EndpointApi = Literal["chat", "completion"]

_NULLS = ("null", "none", "None", "~")
_HOST_PORT = re.compile(r"^(?P<host>[^\s:]+|\[[0-9a-fA-F:]+\]):(?P<port>\d+)$")


class ConfigError(ValueError):
    """A config file, override or value is wrong; the message names the key."""


@functools.cache
def field_types(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def coerce(value: Any, annotation: Any, key: str) -> Any:
    """`value` converted to `annotation` (strings are parsed as YAML scalars first), or ConfigError."""
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin in (typing.Union, types.UnionType):
        options = [a for a in args if a is not type(None)]
        if type(None) in args and (value is None or (isinstance(value, str) and value in _NULLS)):
            return None
        if len(options) != 1:
            raise TypeError(f"{key}: only Optional[X] unions are supported in the schema")
        return coerce(value, options[0], key)
    if origin is Literal:
        if value not in args:
            raise ConfigError(f"{key} must be one of {list(args)}, got {value!r}")
        return value
    if origin in (tuple, list):
        if isinstance(value, str):
            value = _parse_list(value, key)
        if not isinstance(value, (list, tuple)):
            raise ConfigError(f"{key} must be a list, got {value!r}")
        item = args[0] if args else Any
        return tuple(coerce(v, item, f"{key}[{i}]") for i, v in enumerate(value))
    if dataclasses.is_dataclass(annotation):
        if isinstance(value, annotation):
            return value
        raise ConfigError(f"{key} must be a section (a mapping of keys), got {value!r}")
    if annotation is Any:
        return value
    if annotation is str:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return str(value)
        if not isinstance(value, str):
            raise ConfigError(f"{key} must be a string, got {value!r}")
        return value
    if isinstance(value, str):
        value = _parse_scalar(value, key)
    if annotation is bool:
        if not isinstance(value, bool):
            raise ConfigError(f"{key} must be true or false, got {value!r}")
        return value
    if annotation is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"{key} must be an integer, got {value!r}")
        return value
    if annotation is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(f"{key} must be a number, got {value!r}")
        return float(value)
    raise TypeError(f"{key}: unsupported schema type {annotation!r}")


def _parse_scalar(text: str, key: str) -> Any:
    try:
        return load_yaml(text)
    except yaml.YAMLError as exc:
        raise ConfigError(f"{key}: cannot parse {text!r}: {exc}") from exc


def _parse_list(text: str, key: str) -> list[Any]:
    """`[a, b]` (YAML flow list), `a,b` (comma-separated) or "" (empty)."""
    text = text.strip()
    if text.startswith("["):
        value = _parse_scalar(text, key)
        if not isinstance(value, list):
            raise ConfigError(f"{key} must be a list, got {text!r}")
        return value
    return [part.strip() for part in text.split(",")] if text else []


@dataclasses.dataclass(frozen=True)
class Section:
    """Base of every section: typed fields, coerced and checked on construction."""

    def __post_init__(self) -> None:
        name = type(self).__name__
        for field in dataclasses.fields(self):
            value = coerce(getattr(self, field.name), field_types(type(self))[field.name], f"{name}.{field.name}")
            object.__setattr__(self, field.name, value)
        problems = self._problems()
        if problems:
            raise ConfigError(f"invalid {name}: " + "; ".join(problems))

    def _problems(self) -> list[str]:
        """Value checks beyond types; each problem as one short sentence naming the key."""
        return []

    def _at_least(self, low: float, *names: str, note: str = "") -> list[str]:
        """'<name> must be >= <low>, got <value>' for each named field below `low` (NaN included)."""
        values = {n: getattr(self, n) for n in names}
        return [f"{n} must be >= {low}{note}, got {v}" for n, v in values.items() if not v >= low]

    def _above(self, low: float, *names: str) -> list[str]:
        """'<name> must be > <low>, got <value>' for each named field not above `low` (NaN included)."""
        values = {n: getattr(self, n) for n in names}
        return [f"{n} must be > {low}, got {v}" for n, v in values.items() if not v > low]

    def _in_range(self, name: str, low: float, high: float, open_low: bool = False, open_high: bool = False) -> list[str]:
        """'<name> must be in [low, high], got <value>' (an open end written as '(' or ')') when outside it."""
        value = getattr(self, name)
        above = value > low if open_low else value >= low
        below = value < high if open_high else value <= high
        if above and below:
            return []
        return [f"{name} must be in {'(' if open_low else '['}{low}, {high}{')' if open_high else ']'}, got {value}"]

    def to_dict(self) -> dict[str, Any]:
        return _plain(self)


def _selection_problems(levels: tuple[int, ...], ids: tuple[int, ...] | None) -> list[str]:
    """Checks of a KernelBench problem selection (the `eval` and `grpo` sections)."""
    problems = []
    if not levels or any(level < 1 for level in levels):
        problems.append(f"levels must be a non-empty list of levels >= 1, got {list(levels)}")
    if ids is not None and (not ids or any(i < 1 for i in ids)):
        problems.append(f"ids must be null or a non-empty list of ids >= 1, got {list(ids)}")
    return problems


def _source_problems(section: Any) -> list[str]:
    """Checks of a task source (the `eval` and `grpo` sections' dataset, split, num_generated)."""
    problems = []
    if not section.dataset.strip():
        problems.append("dataset must be kernelbench, generated or a path")
    if section.num_generated < 1:
        problems.append(f"num_generated must be >= 1, got {section.num_generated}")
    if section.per_family is not None and section.per_family < 1:
        problems.append(f"per_family must be >= 1 or null, got {section.per_family}")
    return problems


def _plain(value: Any) -> Any:
    if dataclasses.is_dataclass(value):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


@dataclasses.dataclass(frozen=True)
class ModelSection(Section):
    """The policy model.

    source: a Hugging Face checkpoint folder (config.json + safetensors), a GGUF file, or the name of
    a bundled model (`smollm2-135m`). tokenizer: where to read the tokenizer (None: from source).
    dtype: compute dtype; param_dtype: storage dtype of the weights. attention_impl: "reference"
    (plain XLA), "fast" (cuDNN), "auto" (fast when possible). remat: activation checkpointing in
    training ("none", "full", "dots" = keep matmul outputs). Same values as jaxrl.models.config.

    endpoint: the base URL of an OpenAI-compatible API (e.g. http://127.0.0.1:8000/v1); when set, `eval`
    asks it for completions instead of loading `source` (jaxrl.evaluation.endpoint). api_key_env: the
    environment variable holding its API key (null: no key). api: chat (/chat/completions with the
    prompt's messages) or completion (/completions with the prompt rendered by `tokenizer`'s chat
    template). name: the model's name on the API: the one `eval` requests (null: the endpoint's only
    model) and the one `serve` advertises (null: the source's name). max_concurrency: requests in flight;
    max_retries: new attempts after a failed request (timeouts, 429, 5xx), with exponential backoff;
    timeout_s: per request.
    """

    source: str = "smollm2-135m"
    tokenizer: str | None = None
    dtype: DType = "float32"
    param_dtype: DType = "float32"
    attention_impl: AttentionImpl = "auto"
    remat: RematPolicy = "none"
    endpoint: str | None = None
    api_key_env: str | None = None
    api: EndpointApi = "chat"
    name: str | None = None
    max_concurrency: int = 8
    max_retries: int = 4
    timeout_s: float = 600.0

    def _problems(self) -> list[str]:
        problems = []
        if not self.source.strip():
            problems.append("source must name a checkpoint folder, a GGUF file or a bundled model")
        if self.tokenizer is not None and not self.tokenizer.strip():
            problems.append("tokenizer must be null or a path")
        if self.endpoint is not None and not re.match(r"^https?://[^\s/]+", self.endpoint):
            problems.append(f"endpoint must be null or an http(s) URL, got {self.endpoint!r}")
        if self.api_key_env is not None and not re.match(r"^[A-Za-z_][A-Za-z0-9_]*$", self.api_key_env):
            problems.append(f"api_key_env must be null or an environment variable name, got {self.api_key_env!r}")
        if self.name is not None and not self.name.strip():
            problems.append("name must be null or a model name")
        problems += self._at_least(1, "max_concurrency") + self._at_least(0, "max_retries")
        return problems + self._above(0, "timeout_s")


@dataclasses.dataclass(frozen=True)
class MeshSection(Section):
    """Device mesh axis sizes (as jaxrl.sharding.MeshConfig); one of them may be -1 = the remaining devices."""

    data: int = 1
    fsdp: int = -1
    tensor: int = 1

    def _problems(self) -> list[str]:
        sizes = {"data": self.data, "fsdp": self.fsdp, "tensor": self.tensor}
        problems = [f"{k} must be a positive int or -1, got {v}" for k, v in sizes.items() if v == 0 or v < -1]
        if list(sizes.values()).count(-1) > 1:
            problems.append(f"at most one axis may be -1, got {sizes}")
        return problems


@dataclasses.dataclass(frozen=True)
class SamplingSection(Section):
    """How completions are sampled. temperature 0 = greedy; top_k 0 and top_p 1 = off.

    num_samples: completions per problem (the n of pass@k); batch_size: sequences decoded together;
    max_prompt_tokens: longer prompts are refused; stop: extra stop strings besides the EOS tokens.
    """

    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    max_new_tokens: int = 4096
    max_prompt_tokens: int = 4096
    num_samples: int = 1
    batch_size: int = 8
    stop: tuple[str, ...] = ()
    seed: int = 0

    def _problems(self) -> list[str]:
        problems = self._at_least(0, "temperature") + self._in_range("top_p", 0, 1, open_low=True)
        problems += self._at_least(0, "top_k", note=" (0 = off)")
        problems += self._at_least(1, "max_new_tokens", "max_prompt_tokens", "num_samples", "batch_size")
        if any(not s for s in self.stop):
            problems.append("stop strings must not be empty")
        return problems


@dataclasses.dataclass(frozen=True)
class SampleSection(Section):
    """The `sample` command's input. prompt: the text (used as is); prompt_file: a file holding it
    (give one of the two); chat: wrap it as one user message in the tokenizer's chat template."""

    prompt: str | None = None
    prompt_file: str | None = None
    chat: bool = False

    def _problems(self) -> list[str]:
        if self.prompt is not None and self.prompt_file is not None:
            return ["give prompt or prompt_file, not both"]
        return []


@dataclasses.dataclass(frozen=True)
class EvalSection(Section):
    """Which tasks to evaluate and how to report.

    dataset: `kernelbench` (found as jaxrl.data.kernelbench_source says: $KERNELBENCH_JSONL, ../shared,
    the cache or a download), `generated` (tasks the data engine generates in memory: smoke runs), or a
    path: a KernelBench JSONL or folder, or a data-engine rl_tasks.jsonl (jaxrl.data.task_source). levels
    / ids: the KernelBench problems (ids None: all of the levels); cpu_sized: the shrunk variant for the
    Triton interpreter (KernelBench), or the engine's `cpu` scale (generated). split: keep only tasks of
    this split (engine tasks; None: all). num_generated / generated_seed: the `generated` source's size
    and seed. k: the k of the pass@k-style rates (each <= sampling.num_samples); run_dir: write into this
    folder instead of <run.output_root>/<run.name>. fallback: `generated` evaluates generated tasks
    (num_generated of them) when dataset is `kernelbench` and no copy can be found or downloaded (the
    embedded default in a bare, offline clone); None: that is an error. per_family: keep the first
    per_family tasks of each family, in the source's order (engine or generated tasks; None: all).
    """

    dataset: str = "kernelbench"
    levels: tuple[int, ...] = (1, 2)
    ids: tuple[int, ...] | None = None
    cpu_sized: bool = False
    split: Split | None = None
    num_generated: int = 16
    generated_seed: int = 0
    fallback: Fallback | None = None
    per_family: int | None = None
    k: tuple[int, ...] = (1,)
    run_dir: str | None = None

    def _problems(self) -> list[str]:
        problems = _selection_problems(self.levels, self.ids) + _source_problems(self)
        if not self.k or any(k < 1 for k in self.k):
            problems.append(f"k must be a non-empty list of ints >= 1, got {list(self.k)}")
        return problems


@dataclasses.dataclass(frozen=True)
class SandboxSection(Section):
    """Where and how candidates are evaluated.

    targets: sandbox servers as host:port (empty: an embedded local server); backend: auto, cuda or
    interpreter (TRITON_INTERPRET on CPU); workers: worker processes of the embedded server;
    trials: correctness trials per candidate; timeout_s: per evaluation; max_concurrency: requests
    in flight from this client; policy: strict (all math in Triton) or relaxed (torch glue allowed).
    """

    targets: tuple[str, ...] = ()
    backend: Backend = "auto"
    workers: int = 2
    trials: int = 5
    timeout_s: float = 180.0
    max_concurrency: int = 8
    policy: Policy = "strict"

    def _problems(self) -> list[str]:
        problems = []
        for target in self.targets:
            match = _HOST_PORT.match(target)
            if not match or not 1 <= int(match["port"]) <= 65535:
                problems.append(f"targets must be host:port, got {target!r}")
        problems += self._at_least(1, "workers", "max_concurrency")
        problems += self._in_range("trials", 1, 100) + self._in_range("timeout_s", 0, 3600, open_low=True)
        return problems


@dataclasses.dataclass(frozen=True)
class ServeSection(Section):
    """`python -m jaxrl.main serve`: an OpenAI-compatible server for `model.source` (jaxrl.serving).

    host / port: where it listens. batch_window_ms: how long the first waiting request waits for others
    to share its batch (0: batch only what is already waiting). Requests without max_tokens get
    `sampling.max_new_tokens`; `sampling.batch_size` rows are decoded together.
    """

    host: str = "127.0.0.1"
    port: int = 8000
    batch_window_ms: float = 10.0

    def _problems(self) -> list[str]:
        problems = [] if self.host.strip() else ["host must not be empty"]
        return problems + self._in_range("port", 0, 65535) + self._in_range("batch_window_ms", 0, 10000)


@dataclasses.dataclass(frozen=True)
class ScoreSection(Section):
    """`python -m jaxrl.main score`: evaluate completions produced elsewhere (jaxrl.evaluation.score).

    completions: a JSONL of {problem, completion} rows or a KernelBench generations folder
    (`level_<L>_problem_<P>_sample_<S>_kernel.py` files). KernelBench problems are found through the
    `eval` section's dataset and cpu_sized. k: the k of the @k rates (null: 1 and the fewest samples
    any problem has).
    """

    completions: str | None = None
    k: tuple[int, ...] | None = None

    def _problems(self) -> list[str]:
        problems = []
        if self.completions is not None and not self.completions.strip():
            problems.append("completions must be null or a path")
        if self.k is not None and (not self.k or any(k < 1 for k in self.k)):
            problems.append(f"k must be null or a non-empty list of ints >= 1, got {list(self.k)}")
        return problems


@dataclasses.dataclass(frozen=True)
class RunSection(Section):
    """Where outputs go: <output_root>/<name>; name None lets the command pick a timestamped one."""

    output_root: str = "runs"
    name: str | None = None

    def _problems(self) -> list[str]:
        problems = []
        if not self.output_root.strip():
            problems.append("output_root must not be empty")
        if self.name is not None and (not self.name.strip() or "/" in self.name):
            problems.append(f"name must be a non-empty folder name without '/', got {self.name!r}")
        return problems


@dataclasses.dataclass(frozen=True)
class SFTSection(Section):
    """Supervised fine-tuning (`python -m jaxrl.main sft`).

    data: training JSONL; format: `chat` (rows with `messages`, or `prompt` and `completion`) or
    `kernelbook` (`python_code`, `triton_code`, optional `reasoning`: prompted exactly as evaluation).
    eval_data: held-out JSONL in the same format; without it, eval_fraction of data is held out
    (0 = no eval loss). epochs over the data, capped at max_steps optimizer steps (0 = no cap; the
    learning-rate schedule spans the capped run). batch_size: examples per optimizer step;
    micro_batch_rows: packed rows per forward/backward, over the whole mesh (a step accumulates
    gradients over as many micro-batches as its examples fill). max_seq_len: tokens per packed row;
    an example longer than that is dropped or has its completion truncated (overlong).
    logits_chunk: logits and loss computed on chunks of this many positions (0 = all at once; must
    divide max_seq_len). eval_every / log_every: in steps (eval 0 = at the end only). seed: data order.
    """

    data: str | None = None
    format: Literal["chat", "kernelbook"] = "chat"
    eval_data: str | None = None
    eval_fraction: float = 0.0
    eval_every: int = 0
    epochs: int = 1
    max_steps: int = 0
    batch_size: int = 16
    micro_batch_rows: int = 1
    max_seq_len: int = 4096
    overlong: Literal["drop", "truncate"] = "drop"
    logits_chunk: int = 0
    log_every: int = 1
    seed: int = 0

    def _problems(self) -> list[str]:
        problems = []
        for name in ("data", "eval_data"):
            value = getattr(self, name)
            if value is not None and not value.strip():
                problems.append(f"{name} must be null or a path")
        problems += self._in_range("eval_fraction", 0, 1, open_high=True)
        if self.eval_data is not None and self.eval_fraction > 0:
            problems.append("give eval_data or eval_fraction, not both")
        problems += self._at_least(1, "epochs", "batch_size", "micro_batch_rows", "max_seq_len", "log_every")
        problems += self._at_least(0, "eval_every", "max_steps", "logits_chunk")
        if self.logits_chunk > 0 and self.max_seq_len % self.logits_chunk:
            problems.append(f"logits_chunk ({self.logits_chunk}) must divide max_seq_len ({self.max_seq_len})")
        return problems


@dataclasses.dataclass(frozen=True)
class OptimSection(Section):
    """AdamW: linear warmup from 0 to learning_rate, then cosine or linear decay to
    min_lr_ratio x learning_rate at the last step (or constant); decoupled weight decay on matrices
    only (not on norm scales); gradients clipped to max_grad_norm (global norm; 0 = off). The moments
    are kept in float32 whatever the parameter dtype.
    """

    learning_rate: float = 1e-5
    warmup_ratio: float = 0.0
    decay: Literal["cosine", "linear", "constant"] = "cosine"
    min_lr_ratio: float = 0.0
    weight_decay: float = 0.0
    b1: float = 0.9
    b2: float = 0.999
    eps: float = 1e-8
    max_grad_norm: float = 1.0

    def _problems(self) -> list[str]:
        problems = self._above(0, "learning_rate")
        problems += self._in_range("warmup_ratio", 0, 1, open_high=True) + self._in_range("min_lr_ratio", 0, 1)
        problems += self._at_least(0, "weight_decay", "max_grad_norm")
        problems += self._in_range("b1", 0, 1, open_high=True) + self._in_range("b2", 0, 1, open_high=True)
        return problems + self._above(0, "eps")


@dataclasses.dataclass(frozen=True)
class CheckpointSection(Section):
    """Orbax checkpoints in <run dir>/checkpoints: parameters, optimizer state, RNG, step and data
    position. every: save every N steps (0 = only at the end); max_to_keep: newest checkpoints kept
    (null = all); async_save: write in the background while training goes on; resume: continue from
    the newest checkpoint of the run folder (set run.name to the interrupted run's name).
    export_hf: write the trained policy as a Hugging Face folder <run dir>/hf at the end;
    export_dtype: its weight dtype (null = the parameter dtype).
    """

    every: int = 500
    max_to_keep: int | None = 2
    async_save: bool = True
    resume: bool = True
    export_hf: bool = True
    export_dtype: DType | None = None

    def _problems(self) -> list[str]:
        problems = self._at_least(0, "every")
        if self.max_to_keep is not None and self.max_to_keep < 1:
            problems.append(f"max_to_keep must be null or >= 1, got {self.max_to_keep}")
        return problems


@dataclasses.dataclass(frozen=True)
class GRPOSection(Section):
    """GRPO with Hierarchical Reward Decomposition (`python -m jaxrl.main grpo`).

    Tasks (jaxrl.data.task_source): dataset `generated` (the default: num_generated tasks generated
    in memory by the data engine from generated_seed, at the engine's `cpu` scale with cpu_sized), a
    data-engine rl_tasks.jsonl path, or `kernelbench` / a KernelBench JSONL or folder at levels/ids
    (only when asked for: KernelBench is the evaluation benchmark, and training on it is warned
    about). split: the engine split trained on (train by default; None: every split). fallback: as in
    the `eval` section; per_family as there. Each step samples group_size completions for each of tasks_per_step tasks (tasks_per_call tasks per generate call; the sandbox scores one call's
    completions while the next is generated), then makes num_iterations optimizer updates over
    micro-batches of micro_batch_rows sequences (rows padded to a multiple of row_multiple tokens).
    max_steps: rollout steps. Sampling knobs (temperature, max_new_tokens, batch_size...) come from
    the `sampling` section; its num_samples is replaced by group_size.
    Advantages: advantage_estimator (grpo | drgrpo | rloo) with scale_rewards (group | batch | none;
    null = the estimator's default). reward_mode hrd: plan tokens learn from alpha x A(R_speedup),
    code tokens from A(R_correct); uniform: every token from A(uniform_beta R_correct + (1 -
    uniform_beta) R_speedup). speedup_cap: R_speedup's ceiling. timed: whether the sandbox times
    kernels; null = yes unless it is the CPU interpreter; false = every speedup counts as 1 (the
    run's rewards.json says so).
    Loss: PPO clip [1 - epsilon_low, 1 + epsilon_high], KL to the initial policy with weight beta
    (0 = off) by kl_estimator (k1 | k2 | k3), loss_agg_mode (token-mean | seq-mean-token-mean |
    seq-mean-token-sum-norm). reuse_sampler_logprobs: take the old logprobs from the sampler instead
    of recomputing them (only valid at temperature 1). logits_chunk: must divide row_multiple.
    Logprobs are taken at sampling.temperature (> 0; top_p 1 and top_k 0: the loop refuses truncated
    sampling). dynamic_sampling: drop groups whose advantages are all zero and sample more tasks, up to
    max_sampling_rounds rollouts a step, until tasks_per_step groups with a signal are kept.
    speedup_min_ref_us / speedup_noise_floor: a measured speedup reaches R_speedup only when the
    reference took at least that long and |speedup - 1| exceeds the floor (else it counts as 1).
    Logs: log_completions adds each completion's text to its record in the run's rollouts.jsonl.
    """

    dataset: str = "generated"
    levels: tuple[int, ...] = (1, 2)
    ids: tuple[int, ...] | None = None
    cpu_sized: bool = False
    split: Split | None = "train"
    num_generated: int = 256
    generated_seed: int = 0
    fallback: Fallback | None = None
    per_family: int | None = None
    group_size: int = 8
    tasks_per_step: int = 32
    tasks_per_call: int = 4
    max_steps: int = 100
    num_iterations: int = 1
    micro_batch_rows: int = 8
    row_multiple: int = 256
    logits_chunk: int = 0
    reuse_sampler_logprobs: bool = False
    advantage_estimator: Literal["grpo", "drgrpo", "rloo"] = "grpo"
    scale_rewards: Literal["group", "batch", "none"] | None = None
    reward_mode: Literal["hrd", "uniform"] = "hrd"
    alpha: float = 0.1
    uniform_beta: float = 0.3
    speedup_cap: float = 2.0
    timed: bool | None = None
    epsilon_low: float = 0.2
    epsilon_high: float = 0.2
    beta: float = 0.0
    kl_estimator: Literal["k1", "k2", "k3"] = "k3"
    loss_agg_mode: Literal["token-mean", "seq-mean-token-mean", "seq-mean-token-sum-norm"] = "token-mean"
    dynamic_sampling: bool = False
    max_sampling_rounds: int = 3
    speedup_min_ref_us: float = 0.0
    speedup_noise_floor: float = 0.0
    log_every: int = 1
    log_completions: bool = False
    seed: int = 0

    def _problems(self) -> list[str]:
        problems = _selection_problems(self.levels, self.ids) + _source_problems(self)
        problems += self._at_least(2, "group_size", note=" (a group needs a baseline)")
        problems += self._at_least(1, "tasks_per_step", "tasks_per_call", "max_steps", "num_iterations",
                                   "micro_batch_rows", "row_multiple", "log_every", "max_sampling_rounds")
        problems += self._at_least(0, "speedup_min_ref_us") + self._in_range("speedup_noise_floor", 0, 1,
                                                                             open_high=True)
        if self.logits_chunk < 0 or (self.logits_chunk and self.row_multiple % self.logits_chunk):
            problems.append(f"logits_chunk must be 0 or divide row_multiple ({self.row_multiple}), "
                            f"got {self.logits_chunk}")
        if self.advantage_estimator == "drgrpo" and self.scale_rewards not in (None, "none"):
            problems.append("advantage_estimator drgrpo never scales rewards: scale_rewards must be null or none")
        problems += self._at_least(0, "alpha") + self._in_range("uniform_beta", 0, 1) + self._above(0, "speedup_cap")
        problems += self._in_range("epsilon_low", 0, 1, open_high=True)
        return problems + self._at_least(0, "epsilon_high", "beta")


@dataclasses.dataclass(frozen=True)
class DataSection(Section):
    """The data engine's build (`python -m jaxrl.main data`, docs/data.md): generated tasks -> verified,
    decontaminated, split data files in <run.output_root>/<run.name>.

    seed, scale (full | cpu: sizes for the Triton interpreter) and families (None: every family) drive
    the generator. sft_pairs / rl_tasks: the targets; shard after shard of chunk_size tasks is built
    until both are met or max_tasks tasks were generated (0: 4 x the larger target). heldout_families /
    val_families: the families of those splits (None: the engine's default); SFT pairs come from the
    train split only. validate_seeds: seeds each reference runs with, 2 to 20 (it must be deterministic,
    change with its inputs and not be degenerate); min_ref_time_us: references faster than this are dropped (GPU only; 0: keep all).
    inductor: ask the sandbox's Inductor call for a module where a family has no template or its template
    failed. tokenizer: counts tokens (a bundled model's name or a tokenizer folder); pairs longer than
    max_tokens (prompt + completion), or whose completion exceeds max_completion_tokens (the generation
    budget; 0: no limit), are left out. kernelbench: the benchmark decontaminated against
    (None: the shared KernelBench; a build without it is marked not decontaminated). infra_retries:
    new attempts after a sandbox infra_error before the build stops (a rerun resumes). The `sandbox`
    section says where references and pairs run, with max_concurrency requests in flight.
    """

    seed: int = 0
    scale: Literal["full", "cpu"] = "full"
    sft_pairs: int = 10000
    rl_tasks: int = 2000
    max_tasks: int = 0
    families: tuple[str, ...] | None = None
    heldout_families: tuple[str, ...] | None = None
    val_families: tuple[str, ...] | None = None
    chunk_size: int = 256
    inductor: bool = False
    tokenizer: str = "smollm2-135m"
    max_tokens: int = 16384
    max_completion_tokens: int = 0
    validate_seeds: int = 3
    min_ref_time_us: float = 0.0
    kernelbench: str | None = None
    infra_retries: int = 3

    def _problems(self) -> list[str]:
        problems = self._at_least(0, "sft_pairs", "rl_tasks", "max_tasks", "min_ref_time_us", "infra_retries")
        problems += self._at_least(0, "max_completion_tokens")
        problems += self._at_least(1, "chunk_size", "max_tokens") + self._in_range("validate_seeds", 2, 20)
        if self.sft_pairs == 0 and self.rl_tasks == 0:
            problems.append("sft_pairs and rl_tasks are both 0: nothing to build")
        for name in ("families", "heldout_families", "val_families"):
            value = getattr(self, name)
            if value is not None and (not value or any(not f.strip() for f in value)):
                problems.append(f"{name} must be null or a non-empty list of family names, got {list(value)}")
        both = set(self.heldout_families or ()) & set(self.val_families or ())
        if both:
            problems.append(f"families {sorted(both)} are in both heldout_families and val_families")
        if not self.tokenizer.strip():
            problems.append("tokenizer must name a bundled model or a tokenizer folder")
        if self.kernelbench is not None and not self.kernelbench.strip():
            problems.append("kernelbench must be null or a path")
        return problems


@dataclasses.dataclass(frozen=True)
class Config(Section):
    """The whole configuration: one field per section."""

    model: ModelSection = dataclasses.field(default_factory=ModelSection)
    mesh: MeshSection = dataclasses.field(default_factory=MeshSection)
    sampling: SamplingSection = dataclasses.field(default_factory=SamplingSection)
    sample: SampleSection = dataclasses.field(default_factory=SampleSection)
    eval: EvalSection = dataclasses.field(default_factory=EvalSection)
    sandbox: SandboxSection = dataclasses.field(default_factory=SandboxSection)
    run: RunSection = dataclasses.field(default_factory=RunSection)
    sft: SFTSection = dataclasses.field(default_factory=SFTSection)
    optim: OptimSection = dataclasses.field(default_factory=OptimSection)
    checkpoint: CheckpointSection = dataclasses.field(default_factory=CheckpointSection)
    grpo: GRPOSection = dataclasses.field(default_factory=GRPOSection)
    data: DataSection = dataclasses.field(default_factory=DataSection)
    serve: ServeSection = dataclasses.field(default_factory=ServeSection)
    score: ScoreSection = dataclasses.field(default_factory=ScoreSection)

    def _problems(self) -> list[str]:
        if max(self.eval.k) > self.sampling.num_samples:
            n = self.sampling.num_samples
            return [f"eval.k {list(self.eval.k)} asks for more than sampling.num_samples={n} samples"]
        return []
