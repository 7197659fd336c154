"""What every operator family is: a name, a category, difficulties, its operators, and `generate`.

A family draws a Program (`draw`); `generate` turns it into a task: the reference text, the input sets
and the teacher's solution, all from one random generator so that a seed fixes every byte.
Composition families also enumerate their recipes (which pieces in which order), so that splits can
hold out whole recipes.
"""

from __future__ import annotations

import abc
import dataclasses
import logging
import random
from typing import Any

from jaxrl.data.engine.inputs import make_input_sets
from jaxrl.data.engine.ir import Program
from jaxrl.data.engine.render import render_reference
from jaxrl.data.engine.tasks import DIFFICULTIES, GeneratedTask
from jaxrl.data.engine.families.sizes import check_scale, max_numel
from jaxrl.data.engine.teacher import UNTEMPLATED_OPS, NoTemplate, write_solution

log = logging.getLogger(__name__)

Recipe = tuple[str, ...]


@dataclasses.dataclass(frozen=True)
class FamilyInfo:
    name: str
    category: str
    difficulties: tuple[str, ...]  # the difficulty tags its tasks can carry
    composition: bool
    ops: tuple[str, ...]  # single-op families: the exact signature; compositions: every operator they may use
    templated: bool = True  # the teacher writes its solutions (else the build asks Inductor)


@dataclasses.dataclass(frozen=True)
class Draw:
    program: Program
    difficulty: str
    params: dict[str, Any]


class Family(abc.ABC):
    name: str
    category: str
    difficulties: tuple[str, ...]
    composition: bool = False

    @abc.abstractmethod
    def draw(self, rng: random.Random, scale: str, recipe: Recipe | None = None) -> Draw:
        """A random problem of this family at `scale` (`recipe`: which composition, when not drawn)."""

    @property
    @abc.abstractmethod
    def ops(self) -> tuple[str, ...]:
        """The operator signature (compositions: the union over recipes)."""

    def recipes(self) -> tuple[Recipe, ...]:
        """Every recipe a composition family can draw; single-op families have none."""
        return ()

    def recipe_ops(self, recipe: Recipe) -> tuple[str, ...]:
        """The signature a recipe produces (single-op families: their own)."""
        return self.ops

    @property
    def templated(self) -> bool:
        """Whether the teacher has a template for this family's operators."""
        return not any(op in UNTEMPLATED_OPS for op in self.ops)

    def info(self) -> FamilyInfo:
        return FamilyInfo(self.name, self.category, self.difficulties, self.composition, self.ops, self.templated)

    def generate(self, rng: random.Random, scale: str, task_id: str | None = None,
                 recipe: Recipe | None = None) -> GeneratedTask:
        check_scale(scale)
        drawn = self.draw(rng, scale, recipe)
        if drawn.difficulty not in DIFFICULTIES or drawn.difficulty not in self.difficulties:
            raise ValueError(f"family {self.name} drew difficulty {drawn.difficulty!r}")
        program = drawn.program
        reference = render_reference(program, rng)
        input_sets = make_input_sets(program, reference.spell, rng, scale, max_numel(scale))
        teacher_error = None
        try:
            solution = write_solution(program, reference, scale, rng)
        except NoTemplate:  # by design: the build asks Inductor (data.inductor)
            solution = None
        except Exception as exc:  # a teacher bug costs this pair only; the build reports it
            solution, teacher_error = None, f"{type(exc).__name__}: {exc}"
            log.warning("the teacher wrote no solution for %s: %s", task_id or self.name, teacher_error)
        shapes = {t.name: list(program.size(t.dims)) for t in program.inputs}
        params = {"shapes": shapes, "dtype": program.dtype, **drawn.params}
        if reference.expressed:
            params["expressed"] = list(reference.expressed)
        return GeneratedTask(
            task_id=task_id or f"gen-{self.name}",
            family=self.name,
            ops=program.ops,
            composition=self.composition,
            difficulty=drawn.difficulty,
            dtype=program.dtype,
            scale=scale,
            code=reference.code,
            input_sets=input_sets,
            solution=solution,
            params=params,
            teacher_error=teacher_error,
        )


class SingleOpFamily(Family):
    """A family of one operator, named after it: `op` is its name and its whole signature."""

    op: str

    @property
    def name(self) -> str:
        return self.op

    @property
    def ops(self) -> tuple[str, ...]:
        return (self.op,)
