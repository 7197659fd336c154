"""The typed configuration schema: one frozen dataclass per section, nested in `Config`.

Every section derives from `Section`, whose `__post_init__` coerces each field to its annotated
type (so "0.7" becomes 0.7 and "1,2" becomes (1, 2), from YAML or from the command line alike) and
then checks the bounds each field declares with `knob` (messages name the key, the allowed range and the value)
and runs the section's own `_problems()` checks. Each knob is declared once, here: `knob(default, comment,
bounds)`. configs/base.yaml is generated from these declarations (`python -m jaxrl.config.base_yaml`), and the
runtime configs that take the same knob (losses, rewards, the GRPO loop, the sampler) read its default
(`default_of`) and check its bounds (`check_bounds`) from here. Adding a section (e.g. `sft`, `grpo`) means:
define a `Section` subclass of knobs here, add one field to `Config`, and regenerate configs/base.yaml.

This module imports neither jax nor torch: configs are read by every entry point.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import re
import types
import typing
from typing import Any, ClassVar, Literal

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
    """The annotated type of each dataclass field of `cls` (class variables such as yaml_note left out)."""
    hints = typing.get_type_hints(cls)
    return {f.name: hints[f.name] for f in dataclasses.fields(cls)}


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
class Bounds:
    """A numeric knob's range (None: open on that side; finite: no infinity); `note` is added to the message
    (e.g. " (0 = off)")."""

    ge: float | None = None
    gt: float | None = None
    le: float | None = None
    lt: float | None = None
    finite: bool = False
    note: str = ""

    def problem(self, name: str, value: Any, nullable: bool = False) -> str | None:
        """'<name> must be ..., got <value>' when `value` is outside (NaN always is); None when inside or null."""
        if value is None:
            return None
        low_ok = (self.ge is None or value >= self.ge) and (self.gt is None or value > self.gt)
        high_ok = (self.le is None or value <= self.le) and (self.lt is None or value < self.lt)
        if low_ok and high_ok and (not self.finite or math.isfinite(value)):
            return None
        low = self.ge if self.ge is not None else self.gt
        high = self.le if self.le is not None else self.lt
        if high is None:
            what = f"{'a finite number ' if self.finite else ''}{'>=' if self.ge is not None else '>'} {low}"
        elif low is None:
            what = f"{'<=' if self.le is not None else '<'} {high}"
        else:
            what = f"in {'[' if self.ge is not None else '('}{low}, {high}{']' if self.le is not None else ')'}"
        return f"{name} must be {what}{self.note}{' or null' if nullable else ''}, got {value}"


def knob(default: Any, doc: str = "", *, ge: float | None = None, gt: float | None = None, le: float | None = None,
         lt: float | None = None, finite: bool = False, note: str = "") -> Any:
    """A config field declared once: its default, its bounds (checked by every Section, and by the runtime
    configs that carry the same knob, through `check_bounds`) and its comment in the generated configs/base.yaml."""
    bounds = Bounds(ge, gt, le, lt, finite, note) if (ge, gt, le, lt) != (None,) * 4 else None
    return dataclasses.field(default=default, metadata={"doc": doc, "bounds": bounds})


def default_of(section: type, name: str) -> Any:
    """The declared default of `section.name` (for runtime configs that take the same knob)."""
    return next(f.default for f in dataclasses.fields(section) if f.name == name)


def knob_problem(section: type, name: str, value: Any, label: str | None = None) -> str | None:
    """The problem with `value` for `section`'s knob `name` under its declared bounds (named `label`), or None."""
    bounds = next(f.metadata.get("bounds") for f in dataclasses.fields(section) if f.name == name)
    return None if bounds is None else bounds.problem(label or name, value, _nullable(section, name))


def check_bounds(obj: Any, section: type, names: dict[str, str] | None = None) -> None:
    """ConfigError when a field of `obj` is outside the bounds declared for `section`'s knob of that name.

    names: {obj's field: section's field}, for the fields that are named differently; by default every field of
    `obj` that `section` also declares."""
    pairs = names if names is not None else {f.name: f.name for f in dataclasses.fields(section) if hasattr(obj, f.name)}
    problems = [knob_problem(section, theirs, getattr(obj, ours), ours) for ours, theirs in pairs.items()]
    problems = [p for p in problems if p]
    if problems:
        raise ConfigError(f"invalid {type(obj).__name__}: " + "; ".join(problems))


def _nullable(section: type, name: str) -> bool:
    return type(None) in typing.get_args(field_types(section)[name])


@dataclasses.dataclass(frozen=True)
class Section:
    """Base of every section: typed fields, coerced and checked on construction.

    yaml_note: the section's comment in the generated configs/base.yaml."""

    yaml_note: ClassVar[str] = ""

    def __post_init__(self) -> None:
        name = type(self).__name__
        for field in dataclasses.fields(self):
            value = coerce(getattr(self, field.name), field_types(type(self))[field.name], f"{name}.{field.name}")
            object.__setattr__(self, field.name, value)
        problems = [field.metadata["bounds"].problem(field.name, getattr(self, field.name),
                                                     _nullable(type(self), field.name))
                    for field in dataclasses.fields(self) if field.metadata.get("bounds") is not None]
        problems = [p for p in problems if p] + self._problems()
        if problems:
            raise ConfigError(f"invalid {name}: " + "; ".join(problems))

    def _problems(self) -> list[str]:
        """Checks beyond types and declared bounds; each problem as one short sentence naming the key."""
        return []

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

    source: str = knob("smollm2-135m", "HF checkpoint folder, GGUF file, or a bundled model name")
    tokenizer: str | None = knob(None, "null: read the tokenizer from `source`")
    dtype: DType = knob("float32", "compute dtype: float32 | bfloat16 | float16")
    param_dtype: DType = knob("float32", "storage dtype of the weights")
    attention_impl: AttentionImpl = knob("auto", "reference (XLA) | fast (cuDNN) | auto")
    remat: RematPolicy = knob("none", "none | full | dots (keep matmul outputs) -- training only")
    endpoint: str | None = knob(
        None, "an OpenAI-compatible API's base URL: eval asks it instead of loading `source`")
    api_key_env: str | None = knob(None, "environment variable holding the endpoint's API key; null = no key")
    api: EndpointApi = knob(
        "chat", "chat (/chat/completions) | completion (/completions, prompt rendered by `tokenizer`)")
    name: str | None = knob(
        None, "model name on the API (eval: requested, null = the endpoint's only one; serve: advertised)")
    max_concurrency: int = knob(8, "endpoint requests in flight", ge=1)
    max_retries: int = knob(4, "new attempts after a failed request (timeout, 429, 5xx), with backoff", ge=0)
    timeout_s: float = knob(600.0, "per endpoint request", gt=0)

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
        return problems


@dataclasses.dataclass(frozen=True)
class MeshSection(Section):
    """Device mesh axis sizes (as jaxrl.sharding.MeshConfig); one of them may be -1 = the remaining devices."""

    yaml_note: ClassVar[str] = "device mesh; one axis may be -1 = all remaining devices"

    data: int = knob(1)
    fsdp: int = knob(-1)
    tensor: int = knob(1)

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

    temperature: float = knob(1.0, "0 = greedy", ge=0)
    top_p: float = knob(1.0, "1 = off", gt=0, le=1)
    top_k: int = knob(0, "0 = off", ge=0, note=" (0 = off)")
    max_new_tokens: int = knob(4096, ge=1)
    max_prompt_tokens: int = knob(4096, "longer prompts are refused", ge=1)
    num_samples: int = knob(1, "completions per problem (n of pass@k)", ge=1)
    batch_size: int = knob(8, "sequences decoded together", ge=1)
    stop: tuple[str, ...] = knob((), "extra stop strings besides the EOS tokens")
    seed: int = knob(0)

    def _problems(self) -> list[str]:
        return ["stop strings must not be empty"] if any(not s for s in self.stop) else []


@dataclasses.dataclass(frozen=True)
class SampleSection(Section):
    """The `sample` command's input. prompt: the text (used as is); prompt_file: a file holding it
    (give one of the two); chat: wrap it as one user message in the tokenizer's chat template."""

    yaml_note: ClassVar[str] = "python -m jaxrl.main sample (short forms: prompt=, prompt_file=, chat=)"

    prompt: str | None = knob(None, "the prompt text, used as is")
    prompt_file: str | None = knob(None, "or a file holding it")
    chat: bool = knob(False, "wrap it as a user message in the tokenizer's chat template")

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

    dataset: str = knob(
        "kernelbench",
        'kernelbench (found as jaxrl/data/kernelbench_source.py says: $KERNELBENCH_JSONL,\n../shared, the '
        'cache or a download) | generated | a path: KernelBench JSONL\nor folder, or a data-engine '
        'rl_tasks.jsonl')
    levels: tuple[int, ...] = knob((1, 2), "KernelBench levels")
    ids: tuple[int, ...] | None = knob(None, "null = every problem of the levels")
    cpu_sized: bool = knob(False, "shrunk, validated problems for the Triton interpreter (generated: the cpu scale)")
    split: Split | None = knob(None, "engine tasks: train | val | heldout; null = all")
    num_generated: int = knob(16, "dataset=generated: how many tasks", ge=1)
    generated_seed: int = knob(0, "dataset=generated: their seed")
    fallback: Fallback | None = knob(
        None, "generated: generated tasks when dataset=kernelbench cannot be found (offline)")
    per_family: int | None = knob(
        None, "keep the first N tasks of each family (engine or generated tasks); null: all", ge=1)
    k: tuple[int, ...] = knob((1,), "k of the @k rates; each <= sampling.num_samples")
    run_dir: str | None = knob(None, "null = <run.output_root>/<run.name>")

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
    trials: correctness trials per candidate; timing_runs: timed runs of a timed evaluation (the GRPO
    configurations time 30: on an H100 1.28x the timed throughput of 100, the RL-sized set's median times
    0.99x and 1.18x the 100-run ones in two jobs, within the 2x a kernel's figure moves between evaluations
    under load; benchmarks/RESULTS.md); timeout_s: per evaluation; max_concurrency: requests
    in flight from this client; policy: strict (all math in Triton) or relaxed (torch glue allowed).
    """

    targets: tuple[str, ...] = knob((), "host:port of sandbox servers; [] = an embedded local server")
    backend: Backend = knob("auto", "auto | cuda | interpreter")
    workers: int = knob(2, "worker processes of the embedded server", ge=1)
    trials: int = knob(5, "correctness trials per candidate", ge=1, le=100)
    timing_runs: int = knob(100, "timed runs per timed evaluation (KernelBench: 100)", ge=1, le=10000)
    timeout_s: float = knob(180.0, "per evaluation", gt=0, le=3600)
    max_concurrency: int = knob(8, "requests in flight from this client", ge=1)
    policy: Policy = knob("strict", "strict: all math in Triton | relaxed: torch glue allowed")

    def _problems(self) -> list[str]:
        problems = []
        for target in self.targets:
            match = _HOST_PORT.match(target)
            if not match or not 1 <= int(match["port"]) <= 65535:
                problems.append(f"targets must be host:port, got {target!r}")
        return problems


@dataclasses.dataclass(frozen=True)
class ServeSection(Section):
    """`python -m jaxrl.main serve`: an OpenAI-compatible server for `model.source` (jaxrl.serving).

    host / port: where it listens. batch_window_ms: how long the first waiting request waits for others
    to share its batch (0: batch only what is already waiting). Requests without max_tokens get
    `sampling.max_new_tokens`; `sampling.batch_size` rows are decoded together.
    """

    yaml_note: ClassVar[str] = "python -m jaxrl.main serve: an OpenAI-compatible server for model.source"

    host: str = knob("127.0.0.1")
    port: int = knob(8000, "0 = any free port", ge=0, le=65535)
    batch_window_ms: float = knob(
        10.0, "the first waiting request waits this long for others to share its batch", ge=0, le=10000)

    def _problems(self) -> list[str]:
        return [] if self.host.strip() else ["host must not be empty"]


@dataclasses.dataclass(frozen=True)
class ScoreSection(Section):
    """`python -m jaxrl.main score`: evaluate completions produced elsewhere (jaxrl.evaluation.score).

    completions: a JSONL of {problem, completion} rows or a KernelBench generations folder
    (`level_<L>_problem_<P>_sample_<S>_kernel.py` files). KernelBench problems are found through the
    `eval` section's dataset and cpu_sized. k: the k of the @k rates (null: 1 and the fewest samples
    any problem has).
    """

    yaml_note: ClassVar[str] = ("python -m jaxrl.main score: completions produced elsewhere "
                                "(short form: completions=)")

    completions: str | None = knob(None, "a JSONL of {problem, completion} rows or a KernelBench runs/<name> folder")
    k: tuple[int, ...] | None = knob(None, "k of the @k rates; null = 1 and the fewest samples of any problem")

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

    output_root: str = knob("runs")
    name: str | None = knob(None, "null = a timestamped name")

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
    export_every: also export the policy every N steps as <run dir>/hf-step-<N> (the final policy is hf/):
    candidates for choosing a checkpoint afterwards, e.g. on validation tasks (0 = off).
    """

    yaml_note: ClassVar[str] = "supervised fine-tuning: python -m jaxrl.main sft"

    data: str | None = knob(None, "training JSONL (required)")
    format: Literal["chat", "kernelbook"] = knob(
        "chat", "chat (messages | prompt/completion) | kernelbook (python_code, triton_code, reasoning)")
    eval_data: str | None = knob(None, "held-out JSONL, same format")
    eval_fraction: float = knob(0.0, "without eval_data: share of data held out (0 = no eval loss)", ge=0, lt=1)
    eval_every: int = knob(0, "steps; 0 = at the end only", ge=0)
    epochs: int = knob(1, ge=1)
    max_steps: int = knob(0, "cap on optimizer steps; 0 = no cap", ge=0)
    batch_size: int = knob(16, "examples per optimizer step", ge=1)
    micro_batch_rows: int = knob(1, "packed rows per forward/backward (whole mesh); gradients accumulate", ge=1)
    max_seq_len: int = knob(4096, "tokens per packed row", ge=1)
    overlong: Literal["drop", "truncate"] = knob("drop", "longer examples: drop | truncate (the completion)")
    logits_chunk: int = knob(0, "positions per logits/loss chunk; 0 = all at once", ge=0)
    log_every: int = knob(1, "steps between metrics lines", ge=1)
    seed: int = knob(0, "data order")
    export_every: int = knob(0, "steps between exports to <run dir>/hf-step-<N>; 0 = the final hf/ only", ge=0)

    def _problems(self) -> list[str]:
        problems = []
        for name in ("data", "eval_data"):
            value = getattr(self, name)
            if value is not None and not value.strip():
                problems.append(f"{name} must be null or a path")
        if self.eval_data is not None and self.eval_fraction > 0:
            problems.append("give eval_data or eval_fraction, not both")
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

    yaml_note: ClassVar[str] = "AdamW, warmup then decay, global-norm clipping"

    learning_rate: float = knob(1e-5, "peak", gt=0)
    warmup_ratio: float = knob(0.0, "share of the steps warming up from 0", ge=0, lt=1)
    decay: Literal["cosine", "linear", "constant"] = knob("cosine", "cosine | linear | constant")
    min_lr_ratio: float = knob(0.0, "final lr / peak", ge=0, le=1)
    weight_decay: float = knob(0.0, "on matrices only", ge=0)
    b1: float = knob(0.9, ge=0, lt=1)
    b2: float = knob(0.999, ge=0, lt=1)
    eps: float = knob(1e-8, gt=0)
    max_grad_norm: float = knob(1.0, "0 = no clipping", ge=0)


@dataclasses.dataclass(frozen=True)
class CheckpointSection(Section):
    """Orbax checkpoints in <run dir>/checkpoints: parameters, optimizer state, RNG, step and data
    position. every: save every N steps (0 = only at the end); max_to_keep: newest checkpoints kept
    (null = all); async_save: write in the background while training goes on; resume: continue from
    the newest checkpoint of the run folder (set run.name to the interrupted run's name).
    export_hf: write the trained policy as a Hugging Face folder <run dir>/hf at the end;
    export_dtype: its weight dtype (null = the parameter dtype).
    """

    yaml_note: ClassVar[str] = "orbax checkpoints in <run dir>/checkpoints"

    every: int = knob(500, "steps; 0 = only at the end", ge=0)
    max_to_keep: int | None = knob(2, "null = keep all", ge=1)
    async_save: bool = knob(True, "write in the background")
    resume: bool = knob(True, "continue from the newest checkpoint of the run folder")
    export_hf: bool = knob(True, "Hugging Face folder <run dir>/hf at the end")
    export_dtype: DType | None = knob(None, "null = the parameter dtype")



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

    yaml_note: ClassVar[str] = "GRPO with Hierarchical Reward Decomposition: python -m jaxrl.main grpo"

    dataset: str = knob(
        "generated",
        'generated (in memory, by the data engine) | a data-engine rl_tasks.jsonl |\nkernelbench or a '
        'KernelBench path (the evaluation benchmark: warned about)')
    levels: tuple[int, ...] = knob((1, 2), "KernelBench levels")
    ids: tuple[int, ...] | None = knob(None, "null = every problem of the levels")
    cpu_sized: bool = knob(False, "shrunk problems for the Triton interpreter (generated: the cpu scale)")
    split: Split | None = knob("train", "engine tasks: train | val | heldout; null = all")
    num_generated: int = knob(256, "dataset=generated: how many tasks", ge=1)
    generated_seed: int = knob(0, "dataset=generated: their seed")
    fallback: Fallback | None = knob(
        None, "generated: generated tasks when dataset=kernelbench cannot be found (offline)")
    per_family: int | None = knob(
        None, "keep the first N tasks of each family (engine or generated tasks); null: all", ge=1)
    group_size: int = knob(
        8, "completions per task (G); replaces sampling.num_samples", ge=2, note=" (a group needs a baseline)")
    tasks_per_step: int = knob(32, "tasks per rollout step", ge=1)
    tasks_per_call: int = knob(
        4, "tasks per generate call (the sandbox scores one call while the next is generated)", ge=1)
    max_steps: int = knob(100, "rollout steps", ge=1)
    num_iterations: int = knob(1, "optimizer updates per rollout", ge=1)
    micro_batch_rows: int = knob(8, "sequences per forward/backward (whole mesh); gradients accumulate", ge=1)
    row_multiple: int = knob(256, "rows padded to a multiple of this many tokens", ge=1)
    logits_chunk: int = knob(0, "positions per logits chunk; 0 = all at once; must divide row_multiple")
    reuse_sampler_logprobs: bool = knob(
        False, "old logprobs from the sampler (temperature 1 only) instead of a recompute")
    advantage_estimator: Literal["grpo", "drgrpo", "rloo"] = knob("grpo", "grpo | drgrpo | rloo")
    scale_rewards: Literal["group", "batch", "none"] | None = knob(
        None, "group | batch | none; null = the estimator's default")
    reward_mode: Literal["hrd", "uniform"] = knob("hrd", "hrd (plan <- R_speedup, code <- R_correct) | uniform")
    alpha: float = knob(0.1, "HRD weight of the plan term", ge=0, finite=True)
    uniform_beta: float = knob(0.3, "uniform mode: beta R_correct + (1 - beta) R_speedup", ge=0, le=1)
    speedup_cap: float = knob(2.0, "R_speedup = min(speedup, cap)", gt=0)
    timed: bool | None = knob(
        None, "sandbox times kernels? null = unless CPU interpreter; false = speedup counts as 1")
    epsilon_low: float = knob(0.2, "PPO clip below 1", ge=0, lt=1)
    epsilon_high: float = knob(0.2, "PPO clip above 1", ge=0, finite=True)
    beta: float = knob(0.0, "KL weight to the initial policy; 0 = off", ge=0, finite=True)
    kl_estimator: Literal["k1", "k2", "k3"] = knob("k3", "k1 | k2 | k3")
    loss_agg_mode: Literal["token-mean", "seq-mean-token-mean", "seq-mean-token-sum-norm"] = knob(
        "token-mean", "token-mean | seq-mean-token-mean | seq-mean-token-sum-norm")
    dynamic_sampling: bool = knob(False, "drop groups with all-zero advantages and sample more tasks (DAPO)")
    max_sampling_rounds: int = knob(3, "dynamic sampling: rollouts per step at most", ge=1)
    speedup_min_ref_us: float = knob(
        0.0, "speedups count only when the reference took at least this long (else 1)", ge=0)
    speedup_noise_floor: float = knob(0.0, "... and |speedup - 1| exceeds this (else 1)", ge=0, lt=1)
    log_every: int = knob(1, ge=1)
    log_completions: bool = knob(False, "add each completion's text to rollouts.jsonl (large)")
    seed: int = knob(0, "task order and sampling seeds")

    def _problems(self) -> list[str]:
        problems = _selection_problems(self.levels, self.ids) + _source_problems(self)
        if self.logits_chunk < 0 or (self.logits_chunk and self.row_multiple % self.logits_chunk):
            problems.append(f"logits_chunk must be 0 or divide row_multiple ({self.row_multiple}), "
                            f"got {self.logits_chunk}")
        if self.advantage_estimator == "drgrpo" and self.scale_rewards not in (None, "none"):
            problems.append("advantage_estimator drgrpo never scales rewards: scale_rewards must be null or none")
        return problems


@dataclasses.dataclass(frozen=True)
class DataSection(Section):
    """The data engine's build (`python -m jaxrl.main data`, docs/data.md): generated tasks -> verified,
    decontaminated, split data files in <run.output_root>/<run.name>.

    seed, scale (full | cpu: sizes for the Triton interpreter) and families (None: every family) drive
    the generator. sft_pairs / rl_tasks: the targets; shard after shard of chunk_size tasks is built
    until both are met or max_tasks tasks were generated (0: 4 x the larger target). rl_split_tasks: a
    target for the rl split alone (about 1% of the tasks drawn): when those shards hold fewer, shards
    drawn from the rl split's recipes only follow, until it is met (max_tasks, when set, bounds both
    kinds of shard together; 0: 4 x rl_split_tasks more). heldout_families /
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

    yaml_note: ClassVar[str] = "the data engine's build: python -m jaxrl.main data (docs/data.md)"

    seed: int = knob(0)
    scale: Literal["full", "cpu"] = knob("full", "full | cpu (sizes for the Triton interpreter)")
    sft_pairs: int = knob(10000, "target: verified SFT pairs (train split only)", ge=0)
    rl_tasks: int = knob(2000, "target: validated RL tasks (every split)", ge=0)
    rl_split_tasks: int = knob(
        0, "target: validated tasks of the rl split (GRPO's), drawn from its recipes when short; 0 = none", ge=0)
    max_tasks: int = knob(0, "generation budget; 0 = 4 x the larger target", ge=0)
    families: tuple[str, ...] | None = knob(None, "null = every family of the engine")
    heldout_families: tuple[str, ...] | None = knob(None, "null = the engine's default split")
    val_families: tuple[str, ...] | None = knob(None, "null = the engine's default split")
    chunk_size: int = knob(256, "tasks per shard (the unit of resume)", ge=1)
    inductor: bool = knob(
        False, "TorchInductor modules (sandbox Inductor call) where a template is missing or failed")
    tokenizer: str = knob("smollm2-135m", "counts tokens: a bundled model's name or a tokenizer folder")
    max_tokens: int = knob(16384, "pairs longer than this (prompt + completion) are left out", ge=1)
    max_completion_tokens: int = knob(
        0, "pairs whose answer is longer than this (the generation budget) are left out; 0 = no limit", ge=0)
    validate_seeds: int = knob(
        3, "2-20 seeds each reference runs with (deterministic, varies, not degenerate)", ge=2, le=20)
    min_ref_time_us: float = knob(0.0, "GPU: drop references faster than this; 0 = keep all", ge=0)
    kernelbench: str | None = knob(None, "decontaminate against this; null = the shared KernelBench")
    infra_retries: int = knob(3, "new attempts after a sandbox infra_error before the build stops", ge=0)

    def _problems(self) -> list[str]:
        problems = []
        if self.sft_pairs == 0 and self.rl_tasks == 0 and self.rl_split_tasks == 0:
            problems.append("sft_pairs, rl_tasks and rl_split_tasks are all 0: nothing to build")
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
