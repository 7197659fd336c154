"""The records the data engine produces: generated tasks, their input sets and teacher solutions.

A task is a KernelBench-format reference (`Model`, `get_inputs`, `get_init_inputs`) written as text by
an operator family's generator, plus extra input sets (other shapes and values, TritonRL's input
augmentation) and, where the family has a template, a teacher solution (a plan paragraph and a
`ModelNew` module). Nothing here imports torch: running the references is the sandbox's job.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Literal

from sandbox_service.options import InputSet

Difficulty = Literal["easy", "medium", "hard"]
Scale = Literal["full", "cpu"]
SCALES: tuple[str, ...] = ("full", "cpu")
DIFFICULTIES: tuple[str, ...] = ("easy", "medium", "hard")


@dataclasses.dataclass(frozen=True)
class TeacherSolution:
    """A plan paragraph (what to fuse, how to tile, what to mask) and the complete `ModelNew` module."""

    plan: str
    code: str
    origin: Literal["template", "inductor"] = "template"


@dataclasses.dataclass(frozen=True)
class GeneratedTask:
    """One generated problem. `ops` is its operator signature in forward order (e.g. ("matmul", "add",
    "relu")); `family` names the generator (a single op family or a composition recipe). `teacher_error`
    says why the template wrote no solution when it failed (a bug in the teacher costs the pair, not the
    build; the card counts it)."""

    task_id: str
    family: str
    ops: tuple[str, ...]
    composition: bool
    difficulty: Difficulty
    dtype: str
    scale: Scale
    code: str
    input_sets: tuple[InputSet, ...] = ()
    solution: TeacherSolution | None = None
    params: dict[str, Any] = dataclasses.field(default_factory=dict)
    teacher_error: str | None = None
