"""The evaluation sets of issue 21, fixed before any training run and rebuilt from their seeds.

    A  new compositions of trained primitives: tasks of the held-out composition recipes whose every operator
       the training split teaches (`splits.SplitPlan`, `scope.trained_ops`), >= 300 tasks;
    B  operators never trained, their math written out in the reference as an expression
       (`pointwise.EXPRESSIONS`): the evaluation-only operators (tanhshrink, softshrink, hardshrink, logsigmoid,
       celu, relu6) and the held-out activations (mish, selu, hardswish), alone, after a trained piece or after
       nn.Linear, >= 100 tasks;
    C  the same programs as B (same sizes, values, input sets) with the operators by name only: what a model must
       already know;
    D  KernelBench level 1 in scope, at full size (`configs/learning/eval_kernelbench_l1.yaml`);
    E  KernelBench level 2 (`configs/learning/eval_kernelbench_l2.yaml`).

A, B and C are pure functions of `SPECS` (seeds and counts) and the engine's code: nothing is stored but the
spec and a digest of each set (`configs/learning/evalsets.lock.json`), which the tests compare against, so a
change of the engine that would move a set is caught rather than silently evaluated. The sets are written as
rl_tasks.jsonl rows (`eval.dataset=<dir>/A.jsonl`):

    python -m jaxrl.data.engine.evalsets --out runs/evalsets          # A.jsonl, B.jsonl, C.jsonl, digests
    python -m jaxrl.data.engine.evalsets --out runs/evalsets --check  # ... and exit 1 unless they match the lock

`check_files` compares written files with the lock, so that a consumer (the learning recipe) evaluates exactly
the sets fixed before training, not a file rebuilt by a changed engine or edited by hand.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import random
import sys
from pathlib import Path

from jaxrl.data.engine.families import FAMILIES
from jaxrl.data.engine.families.builder import Builder
from jaxrl.data.engine.families.common import DESCRIPTIONS, input_std, op_params, primary
from jaxrl.data.engine.families.compositions import add_piece
from jaxrl.data.engine.families.elementwise import _value_shape
from jaxrl.data.engine.families.matmul import add_linear, add_linear_input
from jaxrl.data.engine.families.sizes import check_scale, max_numel, pick_dtype
from jaxrl.data.engine.generator import generate_tasks
from jaxrl.data.engine.inputs import make_input_sets
from jaxrl.data.engine.ir import Normal, Pointwise, Program
from jaxrl.data.engine.pointwise import EVAL_ONLY_OPS
from jaxrl.data.engine.render import render_reference
from jaxrl.data.engine.scope import trained_ops
from jaxrl.data.engine.splits import SplitPlan
from jaxrl.data.engine.tasks import GeneratedTask

UNSEEN_OPS = EVAL_ONLY_OPS + ("mish", "selu", "hardswish")
LOCK = Path(__file__).resolve().parents[3] / "configs" / "learning" / "evalsets.lock.json"


@dataclasses.dataclass(frozen=True)
class EvalSetSpec:
    """How a set is rebuilt: its generator seed, its size and the scale of its problems."""

    name: str
    seed: int
    count: int
    scale: str = "cpu"


SPECS: dict[str, EvalSetSpec] = {
    "A": EvalSetSpec("A", 21_001, 320),
    "B": EvalSetSpec("B", 21_002, 126),
    "C": EvalSetSpec("C", 21_002, 126),  # B's programs, spelled by name
}


def new_compositions(spec: EvalSetSpec, plan: SplitPlan = SplitPlan()) -> list[GeneratedTask]:
    """Set A: tasks of held-out recipes made only of operators the training split teaches."""
    taught = trained_ops(plan)

    def accept(family: str, recipe) -> bool:
        return (recipe is not None and plan.part_of(family, recipe) == "held_out"
                and set(FAMILIES[family].recipe_ops(recipe)) <= taught)

    families = [name for name, f in FAMILIES.items() if f.composition and any(accept(name, r) for r in f.recipes())]
    tasks = generate_tasks(spec.seed, spec.count, spec.scale, families=families, accept=accept)
    return [dataclasses.replace(t, task_id=f"evalA-{i:04d}-{t.family}") for i, t in enumerate(tasks)]


def _unseen_program(rng: random.Random, op: str, shape: str, scale: str, named: bool) -> Program:
    b = Builder(rng, pick_dtype(rng, scale))
    if shape == "linear":
        add_linear(b, add_linear_input(b, scale), bias=True)
        b.stage(Pointwise(op, op_params(b, op)))
        what = "applies nn.Linear, then an elementwise function"
    else:
        dims = _value_shape(b, scale)
        primary(b, dims, Normal(std=input_std(rng, op)))
        if shape == "after_piece":
            add_piece(b, rng.choice(["mul_scalar", "add_scalar", "add_bias"]))
        b.stage(Pointwise(op, op_params(b, op)))
        what = "applies an elementwise function" if shape == "alone" else "shifts or scales its input, then applies " \
                                                                           "an elementwise function"
    if named:
        what = what.replace("an elementwise function", DESCRIPTIONS[op])
    return b.build(what)


def unseen_operators(spec: EvalSetSpec, named: bool) -> list[GeneratedTask]:
    """Sets B (named=False: the math as an expression) and C (named=True: the operator's name)."""
    check_scale(spec.scale)
    shapes = ("alone", "after_piece", "linear")
    tasks = []
    for i in range(spec.count):
        op, shape = UNSEEN_OPS[i % len(UNSEEN_OPS)], shapes[(i // len(UNSEEN_OPS)) % len(shapes)]
        rng = random.Random(f"evalset:{spec.seed}:{op}:{i}")
        program = _unseen_program(rng, op, shape, spec.scale, named)
        reference = render_reference(program, rng, spelling="name" if named else "expression")
        # Input sets from their own generator: B and C render differently but must be checked on the same inputs.
        inputs_rng = random.Random(f"evalset-inputs:{spec.seed}:{op}:{i}")
        input_sets = make_input_sets(program, reference.spell, inputs_rng, spec.scale, max_numel(spec.scale))
        tasks.append(GeneratedTask(
            task_id=f"eval{spec.name}-{i:04d}-{op}", family=op, ops=program.ops, composition=shape != "alone",
            difficulty="easy" if shape == "alone" else "medium", dtype=program.dtype, scale=spec.scale,
            code=reference.code, input_sets=input_sets,
            params={"shape": shape, "expressed": list(reference.expressed)},
        ))
    return tasks


def build_set(name: str) -> list[GeneratedTask]:
    spec = SPECS[name]
    if name == "A":
        return new_compositions(spec)
    return unseen_operators(spec, named=name == "C")


def eval_row(task: GeneratedTask, set_name: str) -> dict:
    """An rl_tasks.jsonl row (split heldout: never trained on) with the set's name."""
    return {"task_id": task.task_id, "family": task.family, "ops": list(task.ops), "composition": task.composition,
            "difficulty": task.difficulty, "dtype": task.dtype, "scale": task.scale, "split": "heldout",
            "eval_set": set_name, "code": task.code, "input_sets": [s.to_dict() for s in task.input_sets],
            "validation": None}


def digest(tasks: list[GeneratedTask]) -> str:
    """sha256 over the task ids, references and input sets, in order."""
    h = hashlib.sha256()
    for task in tasks:
        h.update(json.dumps(eval_row(task, ""), sort_keys=True).encode())
    return h.hexdigest()


def file_digest(path: Path) -> str:
    """`digest` of the tasks a written set file holds (its rows' `eval_set` aside)."""
    h = hashlib.sha256()
    for line in path.read_text().splitlines():
        if line.strip():
            h.update(json.dumps({**json.loads(line), "eval_set": ""}, sort_keys=True).encode())
    return h.hexdigest()


def check_files(folder: Path, names: tuple[str, ...] = tuple(SPECS), lock: Path = LOCK) -> None:
    """ValueError naming the first set whose `<folder>/<name>.jsonl` is missing or differs from the lock's digest."""
    recorded = json.loads(lock.read_text())
    for name in names:
        path = folder / f"{name}.jsonl"
        if not path.is_file():
            raise ValueError(f"evaluation set {name}: no {path}; build it with python -m jaxrl.data.engine.evalsets")
        if file_digest(path) != recorded[name]["sha256"]:
            raise ValueError(f"evaluation set {name}: {path} does not match the digest in {lock}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True, help="folder for A.jsonl, B.jsonl, C.jsonl")
    parser.add_argument("--write-lock", action="store_true", help="record the digests in " + str(LOCK))
    parser.add_argument("--check", action="store_true", help="exit 1 unless the files match the digests in the lock")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    digests = {}
    for name in SPECS:
        tasks = build_set(name)
        (args.out / f"{name}.jsonl").write_text("".join(json.dumps(eval_row(t, name)) + "\n" for t in tasks))
        digests[name] = {"spec": dataclasses.asdict(SPECS[name]), "tasks": len(tasks), "sha256": digest(tasks)}
        print(f"set {name}: {len(tasks)} tasks -> {args.out / (name + '.jsonl')}")
    if args.write_lock:
        LOCK.write_text(json.dumps(digests, indent=2) + "\n")
    if args.check:
        try:
            check_files(args.out)
        except ValueError as exc:
            print(exc, file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
