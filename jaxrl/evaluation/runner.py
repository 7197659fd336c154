"""The evaluation pipeline: tasks -> prompts -> k completions each -> sandbox -> metrics.

Tasks come from `eval.dataset` (jaxrl.data.task_source): KernelBench by default, a data-engine
rl_tasks.jsonl, or tasks generated in memory; a task's input sets go to the sandbox with each candidate.

Sandbox evaluations start as soon as a batch of completions is generated, so the sandbox works
while the policy samples the next batch. Every verdict is appended to `samples.jsonl` (and flushed)
the moment it arrives, so a run that dies keeps everything evaluated so far. At the end the run
folder holds:

    config.yaml     the resolved config (`python -m jaxrl.main eval --config <it>` repeats the run)
    samples.jsonl   one line per completion: problem, its level / family / split, sample index,
                    completion text, token count, finish reason and the sandbox verdict (the fields
                    of `sandbox ... check --json`)
    metrics.json    per-level and overall metrics (jaxrl.evaluation.metrics), per-family metrics when
                    the tasks have families, per-problem counts, timing
    report.md       the same for humans, with a few failures to read
"""

from __future__ import annotations

import dataclasses
import json
import math
import threading
import time
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any, Protocol

import grpc
from tqdm import tqdm

from jaxrl.config import Config, ConfigError, SandboxSection, dump_config
from jaxrl.data import build_messages
from jaxrl.data.task_source import TaskSelection, TaskSpec, load_tasks
from jaxrl.evaluation.metrics import Metrics, compute_metrics
from jaxrl.evaluation.report import per_problem_summary, write_report
from jaxrl.evaluation.run_dir import create_run_dir
from jaxrl.sampling.api import TextGenerator
from jaxrl.sampling.sampler import params_from_section
from sandbox_service.client import SandboxClient
from sandbox_service.options import CandidateFormat, EvalOptions
from sandbox_service.results import EvalResult, Status, Violation


REACH_TIMEOUT_S = 5.0


class ChatGenerator(TextGenerator, Protocol):
    """A TextGenerator that also renders chat messages into its own prompt format: text through a chat
    template for the JAX sampler; the messages themselves for a chat API (jaxrl.evaluation.endpoint).
    The runner passes what `render` returns to `generate` untouched."""

    def render(self, messages: list[dict[str, str]]) -> Any: ...


@dataclasses.dataclass(frozen=True)
class EvalRun:
    """What a finished evaluation produced; the files under `run_dir` hold the details."""

    run_dir: Path
    metrics: Metrics
    problems: int
    samples: int
    duration_s: float

    @property
    def samples_path(self) -> Path:
        return self.run_dir / "samples.jsonl"

    @property
    def metrics_path(self) -> Path:
        return self.run_dir / "metrics.json"

    @property
    def report_path(self) -> Path:
        return self.run_dir / "report.md"


def eval_options(section: SandboxSection) -> EvalOptions:
    """Sandbox options for model completions: the candidate is the last fenced Python block."""
    return EvalOptions(
        trials=section.trials,
        timing_runs=section.timing_runs,
        timeout_s=section.timeout_s,
        policy=section.policy,
        candidate_format=CandidateFormat.COMPLETION,
    )


def open_client(section: SandboxSection) -> SandboxClient:
    """The configured sandbox servers, or an embedded local server when `targets` is empty.

    A target that does not answer within REACH_TIMEOUT_S, or a cuda backend without a GPU, is a ConfigError.
    The client's own deadline is a safety net for a server that stops answering: it covers a
    request waiting behind `max_concurrency` others of `timeout_s` each on a one-worker server.
    """
    deadline = max(900.0, section.timeout_s * (section.max_concurrency + 1))
    kwargs = {"timeout_s": deadline, "max_concurrency": section.max_concurrency}
    if section.targets:
        client = SandboxClient(section.targets, **kwargs)
        try:
            client.server_info(timeout_s=REACH_TIMEOUT_S)
        except grpc.RpcError as exc:
            client.close()
            raise ConfigError(
                f"sandbox.targets: cannot reach {', '.join(section.targets)} within {REACH_TIMEOUT_S:.0f} s "
                f"({exc.code().name}); start a server with `python -m sandbox_service serve --port PORT` or fix "
                "sandbox.targets ([] starts a local one)") from None
        return client
    if section.backend == "cuda":
        import torch

        if not torch.cuda.is_available():
            raise ConfigError("sandbox.backend=cuda, but torch sees no CUDA GPU here; use sandbox.backend=auto or "
                              "interpreter, or point sandbox.targets at a GPU server")
    return SandboxClient.embedded(backend=section.backend, workers=section.workers, **kwargs)


def run_eval(
    config: Config,
    generator: ChatGenerator,
    client: SandboxClient | None = None,
    progress: bool = True,
    problems: Sequence[TaskSpec] | None = None,
) -> EvalRun:
    """Evaluate `generator` on the configured tasks; writes the run folder and returns its metrics.

    client: a sandbox client to use (left open); None opens one from `config.sandbox` and closes it.
    problems: evaluate these tasks instead of loading `config.eval`'s selection.
    """
    started = time.monotonic()
    if problems is None:
        problems = load_tasks(TaskSelection.from_section(config.eval))
    if not problems:
        raise ValueError("no problems to evaluate")
    keys = [p.key for p in problems]
    if len(set(keys)) != len(keys):
        raise ValueError(f"duplicate problems in the selection: {sorted(k for k in set(keys) if keys.count(k) > 1)}")
    prompts = [generator.render(build_messages(p.code)) for p in problems]
    run_dir = create_run_dir(config, "eval")
    dump_config(config, run_dir / "config.yaml")

    own_client = client is None
    client = open_client(config.sandbox) if own_client else client
    try:
        records, generation = _sample_and_evaluate(config, generator, client, problems, prompts, run_dir, progress)
    finally:
        if own_client:
            client.close()

    return finish_run(config, run_dir, problems, records, generation, started)


def finish_run(
    config: Config,
    run_dir: Path,
    problems: Sequence[TaskSpec],
    records: list[dict[str, Any]],
    timing: dict[str, Any],
    started: float,
    origin: str | None = None,
    ks: Sequence[int] | None = None,
) -> EvalRun:
    """metrics.json and report.md of a run whose verdicts are in `records`; `timing` gains total_s.
    origin: where the completions came from when no model generated them here (`score`);
    ks: the k of the @k rates (None: eval.k)."""
    ks = tuple(ks or config.eval.k)
    metrics = compute_metrics(records, ks)
    by_family = compute_metrics(records, ks, group_by="family") if any(p.family for p in problems) else None
    duration = time.monotonic() - started
    timing = {**timing, "total_s": round(duration, 3)}
    summary = {**metrics.to_dict(), "per_problem": per_problem_summary(problems, records), "timing": timing}
    if by_family is not None:
        summary["by_family"] = by_family.to_dict()
    (run_dir / "metrics.json").write_text(json.dumps(summary, indent=2) + "\n")
    write_report(run_dir / "report.md", config, problems, records, metrics, timing, by_family, origin=origin)
    return EvalRun(run_dir, metrics, len(problems), len(records), duration)


def _sample_and_evaluate(
    config: Config,
    generator: ChatGenerator,
    client: SandboxClient,
    problems: Sequence[TaskSpec],
    prompts: list[str],
    run_dir: Path,
    progress: bool,
) -> tuple[list[dict[str, Any]], dict[str, float]]:
    """Generate in batches of about `sampling.batch_size` sequences, evaluating each batch in the background."""
    params = params_from_section(config.sampling)
    n = params.num_samples
    per_call = max(1, config.sampling.batch_size // n)
    total = len(problems) * n
    generated_tokens = 0
    generation_s = 0.0
    gen_bar = tqdm(total=total, desc="generate", unit="sample", disable=not progress, position=0)
    eval_bar = tqdm(total=total, desc="evaluate", unit="sample", disable=not progress, position=1)
    evaluator = Evaluator(client, eval_options(config.sandbox), config.sandbox.max_concurrency, run_dir, eval_bar)
    with evaluator:
        for call, start in enumerate(range(0, len(problems), per_call)):
            chunk = problems[start : start + per_call]
            t0 = time.monotonic()
            # A different seed per call, so batches do not repeat one random stream.
            call_params = dataclasses.replace(params, seed=params.seed + call)
            try:
                outputs = generator.generate(prompts[start : start + per_call], call_params)
            except ValueError as exc:  # e.g. a prompt over max_prompt_tokens: say which problems
                raise ValueError(f"generation failed for {', '.join(p.key for p in chunk)}: {exc}") from exc
            generation_s += time.monotonic() - t0
            if len(outputs) != len(chunk) or any(len(samples) != n for samples in outputs):
                got = [len(samples) for samples in outputs]
                raise RuntimeError(f"the generator returned {got} completions for {len(chunk)} prompts x {n} samples")
            for problem, samples in zip(chunk, outputs):
                for index, completion in enumerate(samples):
                    generated_tokens += completion.num_tokens
                    details = {"num_tokens": completion.num_tokens, "finish_reason": completion.finish_reason}
                    evaluator.submit(problem, index, completion.text, details)
            gen_bar.update(len(chunk) * n)
        gen_bar.close()
        records = evaluator.wait()
    eval_bar.close()
    generation = {
        "generation_s": round(generation_s, 3),
        "generated_tokens": generated_tokens,
        "tokens_per_s": round(generated_tokens / generation_s, 1) if generation_s > 0 else None,
    }
    return records, generation


class Evaluator:
    """Evaluates completions on a thread pool and appends each verdict to samples.jsonl as it arrives."""

    def __init__(self, client: SandboxClient, options: EvalOptions, concurrency: int, run_dir: Path, bar: tqdm):
        self._client = client
        self._options = options
        self._pool = ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="eval")
        self._futures: list[Future] = []
        self._records: list[dict[str, Any]] = []
        self._correct = 0
        self._lock = threading.Lock()
        self._file = open(run_dir / "samples.jsonl", "w", encoding="utf-8")
        self._bar = bar

    def submit(self, problem: TaskSpec, index: int, text: str, details: dict[str, Any]) -> None:
        """Evaluate `text` as sample `index` of `problem`; `details` (e.g. num_tokens, finish_reason) go
        into its record before the completion and the verdict."""
        self._futures.append(self._pool.submit(self._evaluate, problem, index, text, details))

    def _evaluate(self, problem: TaskSpec, index: int, text: str, details: dict[str, Any]) -> None:
        result = self._verdict(problem, text)
        record = {
            "problem": problem.key,
            **problem.metadata(),
            "sample": index,
            **details,
            "completion": text,
            **result.to_dict(),
        }
        line = json.dumps(_finite(record), allow_nan=False)
        with self._lock:
            if self._file.closed:  # the run was aborted; its remaining verdicts are not wanted
                return
            self._file.write(line + "\n")
            self._file.flush()
            self._records.append(record)
            self._correct += record["status"] == Status.OK.value
            self._bar.update(1)
            self._bar.set_postfix(ok=self._correct, refresh=False)

    def _verdict(self, problem: TaskSpec, text: str) -> EvalResult:
        if not text.strip():
            # The sandbox refuses empty sources as a malformed request; for a completion it is a format failure.
            violation = Violation("format", "empty-completion", "the completion is empty")
            return EvalResult(Status.FORMAT_ERROR, violations=[violation])
        try:
            return self._client.evaluate(problem.code, text, self._options, input_sets=problem.input_sets,
                                         request_id=problem.key)
        except Exception as exc:  # noqa: BLE001 - one bad request must not end the run; it is scored as infra
            return EvalResult(Status.INFRA_ERROR, error=f"sandbox request failed: {type(exc).__name__}: {exc}")

    def wait(self) -> list[dict[str, Any]]:
        """Block until every submitted evaluation has been written; re-raises the first failure to write."""
        for future in self._futures:
            future.result()
        return list(self._records)

    def __enter__(self) -> Evaluator:
        return self

    def __exit__(self, *exc_info) -> None:
        # On an error (or Ctrl-C) queued evaluations are dropped and running ones are not waited
        # for: closing the sandbox client right after ends their requests.
        aborted = exc_info[0] is not None
        self._pool.shutdown(wait=not aborted, cancel_futures=aborted)
        with self._lock:
            self._file.close()


def _finite(value: Any) -> Any:
    """Non-finite floats (e.g. the max error of a NaN output) as the strings "nan"/"inf", which JSON can hold."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_finite(v) for v in value]
    return value
