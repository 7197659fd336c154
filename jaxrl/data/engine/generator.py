"""The task generator's API: list the families, generate one task or many, deterministically.

Every task has its own random generator, seeded from text (`engine:<seed>:<family>:<index>`; Python
seeds `random.Random` from a string through SHA-512, so this is stable across runs and machines, unlike
`hash()`), so a task does not depend on which other tasks were generated with it.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence

from jaxrl.data.engine.families import FAMILIES, Family, FamilyInfo, Recipe, get_family
from jaxrl.data.engine.families.sizes import check_scale
from jaxrl.data.engine.tasks import GeneratedTask

# accept(family name, recipe) -> bool; recipe is None for single-op families.
Accept = Callable[[str, Recipe | None], bool]


def list_families() -> list[FamilyInfo]:
    return [family.info() for family in FAMILIES.values()]


def task_id(family: str, seed: int, index: int) -> str:
    return f"gen-{family}-{seed}-{index}"


def _rng(seed: int, family: str, index: int) -> random.Random:
    return random.Random(f"engine:{seed}:{family}:{index}")


def _make(family: Family, seed: int, scale: str, index: int, recipes: Sequence[Recipe] | None) -> GeneratedTask:
    rng = _rng(seed, family.name, index)
    recipe = rng.choice(recipes) if recipes else None
    return family.generate(rng, scale, task_id=task_id(family.name, seed, index), recipe=recipe)


def generate_task(family: str, seed: int, scale: str = "full", index: int = 0) -> GeneratedTask:
    """One task of `family`; the same as the task `index` of `generate_tasks` would be for that family."""
    _check(seed, scale)
    return _make(get_family(family), seed, scale, index, None)


def generate_tasks(
    seed: int,
    count: int,
    scale: str = "full",
    families: Sequence[str] | None = None,
    accept: Accept | None = None,
) -> list[GeneratedTask]:
    """`count` tasks spread round-robin over `families` (default: all), task i from family i mod n.

    `accept` restricts what may be drawn (a split's families and recipes, see `splits.SplitPlan.accepts`):
    single-op families it rejects are skipped, composition families draw only accepted recipes.
    """
    _check(seed, scale)
    if not isinstance(count, int) or count < 0:
        raise ValueError(f"count must be a non-negative integer, got {count!r}")
    chosen = [get_family(name) for name in (families if families is not None else FAMILIES)]
    if len(set(f.name for f in chosen)) != len(chosen):
        raise ValueError("families are listed more than once")
    plans: list[tuple[Family, tuple[Recipe, ...] | None]] = []
    for family in chosen:
        if accept is None:
            plans.append((family, None))
        elif family.composition:
            recipes = tuple(r for r in family.recipes() if accept(family.name, r))
            if recipes:
                plans.append((family, recipes))
        elif accept(family.name, None):
            plans.append((family, None))
    if count and not plans:
        raise ValueError("no family (or recipe) is left to generate from")
    tasks = []
    for index in range(count):
        family, recipes = plans[index % len(plans)]
        tasks.append(_make(family, seed, scale, index, recipes))
    return tasks


def _check(seed: int, scale: str) -> None:
    if not isinstance(seed, int) or isinstance(seed, bool):
        raise TypeError(f"seed must be an int, got {type(seed).__name__}")
    check_scale(scale)
