"""Which benchmark problems are "in scope" of the data: every operator of the problem (its operator
signature) is one that the training split teaches. The learning demonstration reports KernelBench level 1
on exactly these, listing them, and on the rest of the level for the record.

    python -m jaxrl.data.engine.scope --level 1      # the in-scope problems, with their signatures
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from collections.abc import Iterable, Sequence

from jaxrl.data.engine.families import FAMILIES
from jaxrl.data.engine.signature import op_signature
from jaxrl.data.engine.splits import SplitPlan


@dataclasses.dataclass(frozen=True)
class ScopedProblem:
    key: str
    name: str
    ops: tuple[str, ...]


def trained_ops(plan: SplitPlan = SplitPlan()) -> frozenset[str]:
    """Operators of the train split's single-op families and train recipes of the composition families."""
    ops: set[str] = set()
    for name, family in FAMILIES.items():
        if family.composition:
            for recipe in plan.recipes("train", name):
                ops |= set(family.recipe_ops(recipe))
        elif plan.part_of(name) == "train":
            ops |= set(family.ops)
    return frozenset(ops)


def in_scope(problems: Iterable, plan: SplitPlan = SplitPlan()) -> list[ScopedProblem]:
    """The problems (objects with key, name and code) whose every operator the training split teaches."""
    taught = trained_ops(plan)
    scoped = []
    for problem in problems:
        try:
            ops = tuple(op_signature(problem.code))
        except (SyntaxError, ValueError):
            continue
        if ops and set(ops) <= taught:
            scoped.append(ScopedProblem(problem.key, problem.name, ops))
    return scoped


def main(argv: Sequence[str] | None = None) -> int:
    from jaxrl.data import load_problems

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--level", type=int, default=1)
    parser.add_argument("--dataset", default=None, help="KernelBench JSONL or folder (default: found as usual)")
    args = parser.parse_args(argv)
    scoped = in_scope(load_problems(args.dataset, levels=[args.level]))
    for item in scoped:
        print(f"{item.key:8} {item.name:45} {' -> '.join(item.ops)}")
    print(f"{len(scoped)} problems; ids: [{', '.join(k.split('/')[1] for k in (s.key for s in scoped))}]")
    return 0


if __name__ == "__main__":
    sys.exit(main())
