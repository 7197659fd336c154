"""Where the tasks of `grpo` and `eval` come from: data-engine files, KernelBench, or tasks generated in memory.

A task is what the policy is prompted with and what the sandbox checks a candidate against: a key, the
reference code, the input sets a candidate must also be correct on (TritonRL's input augmentation), and
metadata (family, split, difficulty; the level for KernelBench). The `dataset` key of a section picks the
source:

* `generated`: tasks the data engine generates in memory from a seed, templated by us but validated by
  nobody: for smoke runs;
* `kernelbench` or a KernelBench JSONL / folder: the benchmark's problems at `levels` / `ids`;
* a data-engine `rl_tasks.jsonl` (a JSONL whose rows have `task_id`): validated tasks with their splits.

`fallback: generated` turns a missing KernelBench (`kernelbench` keyword, no copy found and none
downloaded) into generated tasks, with a warning: the embedded default still runs in a bare offline clone.
`split` keeps the tasks of one split (train, val, heldout); KernelBench problems have no split and are
never filtered by it. Nothing here imports torch or jax.
"""

from __future__ import annotations

import dataclasses
import logging
from pathlib import Path
from typing import Any

from jaxrl.data.engine.api import SPLITS, Engine, default_engine
from jaxrl.data.jsonl import read_objects
from jaxrl.data.kernelbench import REPO_ROOT, KernelBenchUnavailable, Problem, load_problems
from jaxrl.data.kernelbench_source import resolve_kernelbench
from sandbox_service.options import InputSet

KERNELBENCH = "kernelbench"
GENERATED = "generated"
ENGINE = "engine"

log = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class TaskSpec:
    """One task. `name` is for humans (a KernelBench problem's name, or the family of an engine task);
    `level` and `problem_id` are KernelBench's."""

    key: str
    code: str
    input_sets: tuple[InputSet, ...] = ()
    name: str = ""
    family: str | None = None
    split: str | None = None
    difficulty: str | None = None
    level: int | None = None
    problem_id: int | None = None
    # Where the task really came from (e.g. generated tasks standing in for a KernelBench that was not found),
    # for reports; not part of a task's identity.
    origin: str = dataclasses.field(default="", compare=False)

    def metadata(self) -> dict[str, Any]:
        """What evaluation records carry about the task besides its key."""
        return {"level": self.level, "problem_id": self.problem_id, "name": self.name, "family": self.family,
                "split": self.split, "difficulty": self.difficulty}


@dataclasses.dataclass(frozen=True)
class TaskSelection:
    """The task-source keys shared by the `eval` and `grpo` sections."""

    dataset: str
    levels: tuple[int, ...] = (1, 2)
    ids: tuple[int, ...] | None = None
    cpu_sized: bool = False
    split: str | None = None
    num_generated: int = 16
    generated_seed: int = 0
    fallback: str | None = None
    per_family: int | None = None

    @classmethod
    def from_section(cls, section: Any) -> TaskSelection:
        return cls(**{f.name: getattr(section, f.name) for f in dataclasses.fields(cls)})


def source_kind(dataset: str) -> str:
    """`kernelbench`, `generated` or `engine` (an rl_tasks.jsonl), from the keyword or the file's first row."""
    if dataset in (KERNELBENCH, GENERATED):
        return dataset
    path = find_dataset(dataset)
    if path.is_dir():
        return KERNELBENCH
    if not path.is_file():
        raise FileNotFoundError(f"dataset {dataset!r}: no such file or folder (or use kernelbench or generated)")
    for row, where in read_objects(path):
        if "task_id" in row:
            return ENGINE
        if "problem_id" in row:
            return KERNELBENCH
        raise ValueError(f"{where}: neither a data-engine task (task_id) nor a KernelBench problem (problem_id)")
    raise ValueError(f"dataset {path} is empty")


def find_dataset(dataset: str) -> Path:
    """The path as given, or relative to the repository root when it does not exist as given."""
    path = Path(dataset).expanduser()
    if path.exists() or path.is_absolute() or not (REPO_ROOT / path).exists():
        return path
    return REPO_ROOT / path


def load_tasks(selection: TaskSelection, engine: Engine | None = None) -> list[TaskSpec]:
    """The selected tasks in a fixed order; ValueError / FileNotFoundError say what is wrong with the selection.

    engine: the generator for `generated` (None: the real one, `jaxrl.data.engine`)."""
    kind = source_kind(selection.dataset)
    if kind != KERNELBENCH and selection.ids is not None:
        raise ValueError(f"ids select KernelBench problems; dataset {selection.dataset!r} is not KernelBench")
    fell_back = ""
    if kind == KERNELBENCH:
        source = None if selection.dataset == KERNELBENCH else find_dataset(selection.dataset)
        try:
            path = resolve_kernelbench(source)
            tasks = kernelbench_tasks(load_problems(path, selection.levels, selection.ids, selection.cpu_sized))
            return _from(first_per_family(tasks, selection.per_family), f"KernelBench ({path})")
        except KernelBenchUnavailable as exc:
            if selection.fallback != GENERATED:
                raise
            log.warning("%s\nFalling back to %d tasks generated by the data engine (fallback: generated).",
                        exc, selection.num_generated)
            kind, fell_back = GENERATED, " in place of KernelBench, which was not found (fallback: generated)"
    if kind == GENERATED:
        scale = "cpu" if selection.cpu_sized else "full"
        tasks = generated_tasks(engine or default_engine(), selection.generated_seed, selection.num_generated, scale)
        origin = f"tasks generated by the data engine (seed {selection.generated_seed}, {scale} scale){fell_back}"
    else:
        path = find_dataset(selection.dataset)
        tasks, origin = read_rl_tasks(path), f"data-engine tasks ({path})"
    return _from(first_per_family(filter_split(tasks, selection.split, selection.dataset), selection.per_family), origin)


def _from(tasks: list[TaskSpec], origin: str) -> list[TaskSpec]:
    return [dataclasses.replace(t, origin=origin) for t in tasks]


def filter_split(tasks: list[TaskSpec], split: str | None, where: str) -> list[TaskSpec]:
    """The tasks of `split` (None: all); an empty result is an error that lists the splits there are."""
    if split is None:
        return tasks
    kept = [t for t in tasks if t.split == split]
    if not kept:
        present = sorted({str(t.split) for t in tasks})
        raise ValueError(f"{where}: no tasks of split {split!r} (splits present: {present})")
    return kept


def first_per_family(tasks: list[TaskSpec], limit: int | None) -> list[TaskSpec]:
    """The first `limit` tasks of each family, in the source's order (None: all): a smaller evaluation set
    that still covers every family, chosen without looking at any model's answers."""
    if limit is None:
        return tasks
    if any(t.family is None for t in tasks):
        raise ValueError("per_family needs tasks with families (a data-engine rl_tasks.jsonl or generated tasks)")
    seen: dict[str, int] = {}
    kept = []
    for task in tasks:
        seen[task.family] = seen.get(task.family, 0) + 1
        if seen[task.family] <= limit:
            kept.append(task)
    return kept


def kernelbench_tasks(problems: list[Problem]) -> list[TaskSpec]:
    return [TaskSpec(p.key, p.code, name=p.name, level=p.level, problem_id=p.problem_id) for p in problems]


def generated_tasks(engine: Engine, seed: int, count: int, scale: str) -> list[TaskSpec]:
    """`count` tasks from the engine's generator, each with the split the engine assigns it by default."""
    split_of = engine.default_split()
    return [
        TaskSpec(t.task_id, t.code, tuple(t.input_sets), name=t.family, family=t.family, split=split_of(t),
                 difficulty=t.difficulty)
        for t in engine.generate_tasks(seed, count, scale)
    ]


def read_rl_tasks(path: Path) -> list[TaskSpec]:
    """Rows of a data-engine rl_tasks.jsonl (`task_id`, `code`, `input_sets` [{name, source}], `family`,
    `split`, `difficulty`); errors name the file and line."""
    tasks: dict[str, TaskSpec] = {}
    for row, where in read_objects(path):
        task = _task_from_row(row, where)
        if task.key in tasks:
            raise ValueError(f"{where}: duplicate task_id {task.key!r}")
        tasks[task.key] = task
    if not tasks:
        raise ValueError(f"{path}: no tasks")
    return list(tasks.values())


def _task_from_row(row: dict[str, Any], where: str) -> TaskSpec:
    for key in ("task_id", "code"):
        if not isinstance(row.get(key), str) or not row[key].strip():
            raise ValueError(f"{where}: {key} must be a non-empty string")
    split = row.get("split")
    if split is not None and split not in SPLITS:
        raise ValueError(f"{where}: split must be one of {list(SPLITS)}, got {split!r}")
    sets = row.get("input_sets", [])
    if not isinstance(sets, list):
        raise ValueError(f"{where}: input_sets must be a list of {{name, source}} objects")
    try:
        input_sets = tuple(InputSet.from_dict(s) for s in sets)
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"{where}: bad input set: {exc}") from exc
    family = row.get("family")
    return TaskSpec(row["task_id"], row["code"], input_sets, name=family or row["task_id"], family=family,
                    split=split, difficulty=row.get("difficulty"))

