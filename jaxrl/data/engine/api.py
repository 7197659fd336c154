"""What the build and the `generated` task source need from the task generator, as one replaceable record.

The generator side of the data engine (operator families, teacher templates, `generate_tasks`, the split
plan, `Decontaminator`) is exported by `jaxrl.data.engine`. Everything here reaches it through `Engine`,
so a test passes a small fake (module-level functions: their qualified names go into the build's
fingerprint) and `default_engine()` returns the real one.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

from jaxrl.data.engine.tasks import GeneratedTask

SPLITS: tuple[str, ...] = ("train", "rl", "val", "heldout")
# The generator's split plan names its parts train / rl / validation / held_out.
_PLAN_PARTS = {"train": "train", "rl": "rl", "validation": "val", "held_out": "heldout"}
_SPLIT_PARTS = {split: part for part, split in _PLAN_PARTS.items()}

SplitFn = Callable[[GeneratedTask], str]


class EngineUnavailable(RuntimeError):
    """A part of the data engine (the task generator, or a sandbox call the build makes) is not in this
    checkout."""


class GenerateTasks(Protocol):
    """`generate_tasks(seed, count, scale, families)`: `count` tasks, the same ones for the same arguments,
    task i drawn from `families[i % len(families)]` when a generator goes round-robin."""

    def __call__(self, seed: int, count: int, scale: str = "full",
                 families: Sequence[str] | None = None) -> list[GeneratedTask]: ...


class Matcher(Protocol):
    """A decontaminator built over {KernelBench key: source}: `match(source)` is None or a hit with
    `problem` (the key) and `matcher` (how it matched)."""

    def match(self, source: str) -> Any: ...


@dataclasses.dataclass(frozen=True)
class Engine:
    """The generator's functions. list_families() returns records with a `name`; decontaminator(sources)
    builds a Matcher; splitter(heldout_families, val_families) returns the function giving a task's split
    (train, rl, val or heldout), with the engine's default families where a list is None;
    split_generator(heldout_families, val_families, split), where the engine has one, returns a
    GenerateTasks that draws only that split's families and recipes (so a build can ask for rl-split tasks
    without drawing ~100 others for each)."""

    generate_tasks: GenerateTasks
    list_families: Callable[[], list[Any]]
    decontaminator: Callable[[Mapping[str, str]], Matcher]
    splitter: Callable[[Sequence[str] | None, Sequence[str] | None], SplitFn]
    split_generator: Callable[[Sequence[str] | None, Sequence[str] | None, str], GenerateTasks] | None = None

    @property
    def generator_name(self) -> str:
        """`module.qualname` of generate_tasks: which generator built a set of shards."""
        fn = self.generate_tasks
        return f"{getattr(fn, '__module__', '?')}.{getattr(fn, '__qualname__', type(fn).__name__)}"

    def family_names(self) -> list[str]:
        return [family.name for family in self.list_families()]

    def default_split(self) -> SplitFn:
        return self.splitter(None, None)


def default_engine() -> Engine:
    """The real generator from `jaxrl.data.engine`; EngineUnavailable names what is missing."""
    try:
        from jaxrl.data.engine import Decontaminator, SplitPlan, generate_tasks, list_families
    except ImportError as exc:
        raise EngineUnavailable(
            "the task generator is not in this checkout: jaxrl.data.engine does not export generate_tasks, "
            f"list_families, SplitPlan and Decontaminator ({exc})"
        ) from None

    def plan_of(heldout: Sequence[str] | None, val: Sequence[str] | None) -> SplitPlan:
        lists = {"held_out_families": heldout, "validation_families": val}
        return SplitPlan(**{k: tuple(v) for k, v in lists.items() if v is not None})

    def splitter(heldout: Sequence[str] | None, val: Sequence[str] | None) -> SplitFn:
        plan = plan_of(heldout, val)
        return lambda task: _PLAN_PARTS[plan.part_of_task(task)]

    def split_generator(heldout: Sequence[str] | None, val: Sequence[str] | None, split: str) -> GenerateTasks:
        plan = plan_of(heldout, val)
        accept = plan.accepts(_SPLIT_PARTS[split])

        def generate(seed: int, count: int, scale: str = "full",
                     families: Sequence[str] | None = None) -> list[GeneratedTask]:
            return generate_tasks(seed, count, scale, families, accept=accept)

        return generate

    return Engine(generate_tasks, list_families, Decontaminator, splitter, split_generator)


def check_families(engine: Engine, names: Sequence[str] | None, key: str) -> None:
    """ValueError naming `key` and the known families when a name is not one of the engine's families."""
    if names is None:
        return
    known = engine.family_names()
    unknown = sorted(set(names) - set(known))
    if unknown:
        raise ValueError(f"{key}: unknown families {unknown}; the engine has {sorted(known)}")
