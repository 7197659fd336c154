"""`python -m jaxrl.main score completions=PATH`: evaluate completions produced elsewhere.

The same sandbox, metrics, pass@k and run folder as `eval` (jaxrl.evaluation.runner), for completions that
another tool generated. PATH is one of:

* a JSONL file, one row per completion: `completion` (a model's answer with a fenced block, or the code
  itself) and the problem, as `level` and `problem_id` (KernelBench, found through the `eval` section's
  dataset and cpu_sized), as `reference` (the PyTorch source, with an optional `name` and `input_sets`
  [{name, source}]), or as `problem`: {level, problem_id}, "L1/19" or the reference source. `sample`
  (optional) numbers a problem's samples; by default they are numbered in file order.
* a KernelBench generations folder (runs/<name> of KernelBench's generate_samples.py): files
  `level_<L>_problem_<P>_sample_<S>_kernel.py`, each the code of one sample.

A candidate is read as a completion when it holds a fenced block, else as the module itself.
"""

from __future__ import annotations

import dataclasses
import hashlib
import re
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tqdm import tqdm

from jaxrl.config import Config, ConfigError, dump_config
from jaxrl.data.jsonl import read_objects
from jaxrl.data.problem import problem_key
from jaxrl.data.task_source import TaskSelection, TaskSpec, load_tasks
from jaxrl.evaluation.run_dir import create_run_dir
from jaxrl.evaluation.runner import EvalRun, Evaluator, eval_options, finish_run, open_client
from sandbox_service.client import SandboxClient
from sandbox_service.options import CandidateFormat, InputSet

KERNEL_FILE = re.compile(r"^level_(\d+)_problem_(\d+)_sample_(\d+)_kernel\.py$")
_KEY = re.compile(r"^L(\d+)/(\d+)$")


@dataclasses.dataclass(frozen=True)
class ScoredRow:
    """One completion to evaluate: its problem (a KernelBench (level, id) or a TaskSpec built from a
    reference), its sample index (None: next in file order) and where it was read."""

    completion: str
    where: str
    kernelbench: tuple[int, int] | None = None
    task: TaskSpec | None = None
    sample: int | None = None


def read_completions(path: Path) -> list[ScoredRow]:
    """The rows of a JSONL file or a KernelBench generations folder; ValueError names the bad row."""
    if path.is_dir():
        rows = list(_kernelbench_folder(path))
        if not rows:
            raise ValueError(f"{path}: no level_<L>_problem_<P>_sample_<S>_kernel.py files")
        return rows
    if not path.is_file():
        raise FileNotFoundError(f"score.completions {str(path)!r}: no such file or folder")
    rows = [_row(row, where) for row, where in read_objects(path)]
    if not rows:
        raise ValueError(f"{path}: no rows")
    return rows


def _kernelbench_folder(path: Path) -> Iterator[ScoredRow]:
    for file in sorted(path.iterdir()):
        match = KERNEL_FILE.match(file.name)
        if match:
            level, problem_id, sample = map(int, match.groups())
            yield ScoredRow(file.read_text(encoding="utf-8", errors="replace"), str(file), (level, problem_id),
                            sample=sample)


def _row(row: dict[str, Any], where: str) -> ScoredRow:
    completion = row.get("completion")
    if not isinstance(completion, str):
        raise ValueError(f"{where}: `completion` must be a string")
    sample = row.get("sample")
    if sample is not None and (isinstance(sample, bool) or not isinstance(sample, int) or sample < 0):
        raise ValueError(f"{where}: `sample` must be an integer >= 0, got {sample!r}")
    problem = row.get("problem")
    if isinstance(problem, dict):
        row, problem = {**row, **problem}, None
    if isinstance(problem, str) and _KEY.match(problem):
        level, problem_id = map(int, _KEY.match(problem).groups())
        return ScoredRow(completion, where, (level, problem_id), sample=sample)
    reference = problem if isinstance(problem, str) else row.get("reference")
    if isinstance(reference, str) and reference.strip():
        return ScoredRow(completion, where, task=_reference_task(row, reference, where), sample=sample)
    level, problem_id = row.get("level"), row.get("problem_id")
    if isinstance(level, int) and isinstance(problem_id, int) and not isinstance(level, bool):
        return ScoredRow(completion, where, (level, problem_id), sample=sample)
    raise ValueError(f"{where}: name the problem with `level` and `problem_id`, `reference` (its source) or `problem`")


def _reference_task(row: dict[str, Any], reference: str, where: str) -> TaskSpec:
    """A task from a reference's source; its key is `name` or a short hash of the source."""
    name = row.get("name") or f"ref-{hashlib.sha256(reference.encode()).hexdigest()[:8]}"
    sets = row.get("input_sets") or []
    try:
        input_sets = tuple(InputSet.from_dict(s) for s in sets)
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"{where}: bad input set: {exc}") from exc
    return TaskSpec(str(name), reference, input_sets, name=str(name))


def resolve_problems(rows: list[ScoredRow], config: Config) -> list[tuple[TaskSpec, int, ScoredRow]]:
    """(task, sample index, row) per row; KernelBench problems come from the `eval` section's dataset."""
    wanted = sorted({r.kernelbench for r in rows if r.kernelbench is not None})
    found: dict[str, TaskSpec] = {}
    if wanted:
        e = config.eval
        selection = TaskSelection(dataset=e.dataset, levels=tuple(sorted({lv for lv, _ in wanted})),
                                  ids=tuple(sorted({i for _, i in wanted})), cpu_sized=e.cpu_sized)
        found = {t.key: t for t in load_tasks(selection)}
        missing = [problem_key(*w) for w in wanted if problem_key(*w) not in found]
        if missing:
            raise ValueError(f"problems {', '.join(missing)} are not in eval.dataset={e.dataset}")
    out, next_sample, seen, tasks = [], {}, set(), {}
    for row in rows:
        task = found[problem_key(*row.kernelbench)] if row.kernelbench is not None else row.task
        if tasks.setdefault(task.key, task).code != task.code:
            raise ValueError(f"{row.where}: problem {task.key!r} appears with two different references")
        sample = next_sample.get(task.key, 0) if row.sample is None else row.sample
        if (task.key, sample) in seen:
            raise ValueError(f"{row.where}: a second sample {sample} of {task.key}")
        seen.add((task.key, sample))
        next_sample[task.key] = max(next_sample.get(task.key, 0), sample + 1)
        out.append((task, sample, row))
    return out


def run_score(config: Config, progress: bool = True, client: SandboxClient | None = None) -> EvalRun:
    """Evaluates the completions of `score.completions` and writes the run folder (as `eval` does).
    client: a sandbox client to use (left open); None opens one from `config.sandbox` and closes it."""
    started = time.monotonic()
    if config.score.completions is None:
        raise ConfigError("nothing to score: give completions=PATH (a JSONL or a KernelBench runs/<name> folder)")
    path = Path(config.score.completions).expanduser()
    try:
        items = resolve_problems(read_completions(path), config)
    except (ValueError, FileNotFoundError) as exc:
        raise ConfigError(str(exc)) from exc
    problems = list({task.key: task for task, _, _ in items}.values())
    counts = [sum(t.key == p.key for t, _, _ in items) for p in problems]
    ks = config.score.k or tuple(sorted({1, min(counts)}))
    run_dir = create_run_dir(config, "score")
    dump_config(config, run_dir / "config.yaml")
    options = dataclasses.replace(eval_options(config.sandbox), candidate_format=CandidateFormat.AUTO)
    bar = tqdm(total=len(items), desc="evaluate", unit="sample", disable=not progress, file=sys.stderr)
    own_client = client is None
    client = open_client(config.sandbox) if own_client else client
    try:
        with Evaluator(client, options, config.sandbox.max_concurrency, run_dir, bar) as evaluator:
            for task, sample, row in items:
                evaluator.submit(task, sample, row.completion, {"source": row.where})
            records = evaluator.wait()
    finally:
        bar.close()
        if own_client:
            client.close()
    return finish_run(config, run_dir, problems, records, {}, started, origin=str(path), ks=ks)
