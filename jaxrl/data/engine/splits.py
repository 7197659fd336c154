"""Train / validation / held-out splits by family and by composition recipe, never only by shape.

A single-op family belongs wholly to one part. The default held-out and validation families are fair:
each is made of primitives that training sees (mish = x * tanh(softplus(x)) with tanh and softplus in
train; selu ~ elu; hardswish = x * hardsigmoid(x); logsumexp from max, exp, sum and log (softmax);
cummax from cumsum and max; Huber from MSE and L1; bmm from matmul). Their distinctive operators are
*reserved*: a composition that uses one (gemm + mish) goes to that part too, so a held-out operator
never appears in training.

A composition recipe is identified by its operator sequence (so `x * scalar` and `x * vector` recipes
that read the same go together, across composition families): it goes to held-out if it uses a
held-out operator or is listed in `held_out_recipes`, else to validation likewise, else by a stable hash
of (seed, op sequence) a `held_out_fraction` / `validation_fraction` of recipes go to held-out /
validation, and an `rl_fraction` to the `rl` part: recipes made only of trained operators whose tasks are
never SFT pairs, so that GRPO trains on tasks SFT never saw (disjoint by recipe, not only by shape).
Everything is deterministic for a given plan.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
from collections.abc import Iterable

from jaxrl.data.engine.families import FAMILIES, Recipe, get_family
from jaxrl.data.engine.generator import Accept, generate_tasks
from jaxrl.data.engine.tasks import GeneratedTask

PARTS = ("train", "rl", "validation", "held_out")
DEFAULT_HELD_OUT_FAMILIES = ("mish", "selu", "hardswish", "logsumexp", "cummax", "huber_loss", "bmm")
DEFAULT_VALIDATION_FAMILIES = ("gelu_tanh", "softsign", "min_reduce", "cumprod", "l1_loss", "gather")
# Whole recipes held out whatever family draws them; their parts are all seen in training.
DEFAULT_HELD_OUT_RECIPES = (("matmul", "add", "gelu"), ("layer_norm", "silu"), ("softmax", "mul"), ("sum", "mul"))
DEFAULT_VALIDATION_RECIPES = (("matmul", "add", "sigmoid"), ("rms_norm", "relu"), ("mean", "sub"))


@dataclasses.dataclass(frozen=True)
class SplitPlan:
    seed: int = 0
    held_out_families: tuple[str, ...] = DEFAULT_HELD_OUT_FAMILIES
    validation_families: tuple[str, ...] = DEFAULT_VALIDATION_FAMILIES
    held_out_recipes: tuple[tuple[str, ...], ...] = DEFAULT_HELD_OUT_RECIPES
    validation_recipes: tuple[tuple[str, ...], ...] = DEFAULT_VALIDATION_RECIPES
    held_out_fraction: float = 0.1
    validation_fraction: float = 0.1
    rl_fraction: float = 0.15

    def __post_init__(self) -> None:
        for name in self.held_out_families + self.validation_families:
            family = get_family(name)
            if family.composition:
                raise ValueError(f"{name} is a composition family: hold out its recipes instead")
        both = set(self.held_out_families) & set(self.validation_families)
        if both:
            raise ValueError(f"families both held out and in validation: {sorted(both)}")
        if not (0 <= self.held_out_fraction and 0 <= self.validation_fraction and 0 <= self.rl_fraction
                and self.held_out_fraction + self.validation_fraction + self.rl_fraction < 1):
            raise ValueError("recipe fractions must be non-negative and sum to less than 1")
        object.__setattr__(self, "held_out_recipes", tuple(tuple(r) for r in self.held_out_recipes))
        object.__setattr__(self, "validation_recipes", tuple(tuple(r) for r in self.validation_recipes))

    # -- what is reserved ------------------------------------------------------------------------
    def _singles(self, part: str) -> set[str]:
        singles = {name for name, f in FAMILIES.items() if not f.composition}
        if part == "held_out":
            return set(self.held_out_families)
        if part == "validation":
            return set(self.validation_families)
        return singles - set(self.held_out_families) - set(self.validation_families)

    @functools.cached_property
    def _reserved(self) -> dict[str, frozenset[str]]:
        train_ops = {op for name in self._singles("train") for op in FAMILIES[name].ops}
        held = frozenset({op for name in self._singles("held_out") for op in FAMILIES[name].ops} - train_ops)
        validation = frozenset({op for name in self._singles("validation") for op in FAMILIES[name].ops}
                               - train_ops - held)
        return {"held_out": held, "validation": validation}

    def reserved_ops(self, part: str) -> frozenset[str]:
        """Operators that, among single-op families, only the families of `part` (held_out or validation) have."""
        if part not in self._reserved:
            raise ValueError(f"reserved_ops is for 'held_out' or 'validation', got {part!r}")
        return self._reserved[part]

    # -- assignment ------------------------------------------------------------------------------
    def part_of(self, family: str, recipe: Recipe | None = None) -> str:
        """The part a family (single-op) or one of its recipes (composition) belongs to."""
        fam = get_family(family)
        if not fam.composition:
            if family in self.held_out_families:
                return "held_out"
            return "validation" if family in self.validation_families else "train"
        if recipe is None:
            raise ValueError(f"{family} is a composition family: say which recipe")
        return self.part_of_ops(fam.recipe_ops(tuple(recipe)))

    def part_of_ops(self, ops: tuple[str, ...]) -> str:
        """The part of a composition recipe with operator sequence `ops`."""
        ops = tuple(ops)
        if set(ops) & self.reserved_ops("held_out") or ops in self.held_out_recipes:
            return "held_out"
        if set(ops) & self.reserved_ops("validation") or ops in self.validation_recipes:
            return "validation"
        digest = hashlib.sha256(f"{self.seed}:{'+'.join(ops)}".encode()).digest()
        u = int.from_bytes(digest[:8], "big") / 2**64
        if u < self.held_out_fraction:
            return "held_out"
        if u < self.held_out_fraction + self.validation_fraction:
            return "validation"
        return "rl" if u < self.held_out_fraction + self.validation_fraction + self.rl_fraction else "train"

    def part_of_task(self, task: GeneratedTask) -> str:
        recipe = task.params.get("recipe")
        return self.part_of(task.family, tuple(recipe) if recipe is not None else None)

    def recipes(self, part: str, family: str) -> tuple[Recipe, ...]:
        _check_part(part)
        return tuple(r for r in get_family(family).recipes() if self.part_of(family, r) == part)

    def families(self, part: str) -> tuple[str, ...]:
        """Single-op families of `part`, and composition families with at least one recipe in it."""
        _check_part(part)
        names = []
        for name, family in FAMILIES.items():
            if family.composition:
                if self.recipes(part, name):
                    names.append(name)
            elif self.part_of(name) == part:
                names.append(name)
        return tuple(names)

    def accepts(self, part: str) -> Accept:
        """For `generate_tasks(accept=...)`: draw only what belongs to `part`."""
        _check_part(part)
        return lambda family, recipe: self.part_of(family, recipe) == part


def _check_part(part: str) -> None:
    if part not in PARTS:
        raise ValueError(f"unknown split part {part!r}; expected one of {PARTS}")


def generate_split(plan: SplitPlan, part: str, seed: int, count: int, scale: str = "full") -> list[GeneratedTask]:
    """`count` tasks of one part of the split."""
    return generate_tasks(seed, count, scale, families=plan.families(part), accept=plan.accepts(part))


def split_tasks(tasks: Iterable[GeneratedTask], plan: SplitPlan) -> dict[str, list[GeneratedTask]]:
    """Tasks generated without a split, sorted into the plan's parts."""
    out: dict[str, list[GeneratedTask]] = {part: [] for part in PARTS}
    for task in tasks:
        out[plan.part_of_task(task)].append(task)
    return out
