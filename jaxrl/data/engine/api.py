"""What the build and the `generated` task source need from the task generator, as one replaceable record.

The generator side of the data engine (operator families, teacher templates, `generate_tasks`, splits,
`Decontaminator`) is exported by `jaxrl.data.engine`. Everything here reaches it through `Engine`, so a
test passes a small fake (module-level functions: their qualified names go into the build's fingerprint)
and `default_engine()` returns the real one.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from jaxrl.data.engine.tasks import GeneratedTask

SPLITS: tuple[str, ...] = ("train", "val", "heldout")


class EngineUnavailable(RuntimeError):
    """A part of the data engine (the task generator, or the sandbox calls the build makes) is not in
    this checkout."""


class GenerateTasks(Protocol):
    """`generate_tasks(seed, count, scale, families)`: `count` tasks, the same ones for the same arguments."""

    def __call__(self, seed: int, count: int, scale: str = "full",
                 families: Sequence[str] | None = None) -> list[GeneratedTask]: ...


class Matcher(Protocol):
    """A decontaminator built over KernelBench sources: `match(source)` is None or a hit (see `kernelbench_index`)."""

    def match(self, source: str) -> Any: ...


@dataclasses.dataclass(frozen=True)
class Engine:
    """The generator's functions. list_families() returns records with a `name`; decontaminator(sources)
    builds a Matcher over a list of KernelBench sources; assign_split(task) is train, val or heldout."""

    generate_tasks: GenerateTasks
    assign_split: Callable[[GeneratedTask], str]
    list_families: Callable[[], list[Any]]
    decontaminator: Callable[[list[str]], Matcher]

    @property
    def generator_name(self) -> str:
        """`module.qualname` of generate_tasks: which generator built a set of shards."""
        fn = self.generate_tasks
        return f"{getattr(fn, '__module__', '?')}.{getattr(fn, '__qualname__', type(fn).__name__)}"

    def family_names(self) -> list[str]:
        return [family.name for family in self.list_families()]


def default_engine() -> Engine:
    """The real generator from `jaxrl.data.engine`; EngineUnavailable names what is missing."""
    try:
        from jaxrl.data.engine import Decontaminator, assign_split, generate_tasks, list_families
    except ImportError as exc:
        raise EngineUnavailable(
            "the task generator is not in this checkout: jaxrl.data.engine does not export generate_tasks, "
            f"assign_split, list_families and Decontaminator ({exc})"
        ) from None
    return Engine(generate_tasks, assign_split, list_families, Decontaminator)


def kernelbench_index(hit: Any) -> int:
    """The position, in the list of sources the decontaminator was built on, of the problem a hit matched."""
    return int(hit.index)


def check_families(engine: Engine, names: Sequence[str] | None, key: str) -> None:
    """ValueError naming `key` and the known families when a name is not one of the engine's families."""
    if names is None:
        return
    known = engine.family_names()
    unknown = sorted(set(names) - set(known))
    if unknown:
        raise ValueError(f"{key}: unknown families {unknown}; the engine has {sorted(known)}")
