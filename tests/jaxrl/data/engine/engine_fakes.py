"""A small fake generator, decontaminator and sandbox client for the data-engine build tests.

Families (a size drawn from a short list, so some tasks repeat earlier ones):
    relu, rowsum      train, with a template (rowsum's template is wrong for sizes 7, 12, 17...: BAD_KERNEL)
    softmax           train, no template
    broken            train, its reference fails validation (BAD_REF)
    flaky             train, the sandbox answers infra_error on the first validation of each reference
    gelu / tanh       heldout / val, with a template
    twin              train, its reference is TWIN_CODE, a "KernelBench problem" (see `corpus`)
    sigmoid           RL_ENGINE only: rl split for sizes divisible by 4 (as a composition family's rl recipes
                      are), else train; RL_ENGINE's split generator draws only those (from a wider range of
                      sizes), so about 3% of the main stream's tasks and all of the rl stream's are rl-split
"""

from __future__ import annotations

import json
import random
import threading
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from jaxrl.config.schema import DataSection
from jaxrl.data.engine.api import Engine
from jaxrl.data.engine.build import BuildResult, BuildSettings, build
from jaxrl.data.engine.kernelbench_corpus import Corpus
from jaxrl.data.engine.tasks import GeneratedTask, TeacherSolution
from jaxrl.data.kernelbench import Problem
from sandbox_service.options import EvalOptions, InductorOptions, InputSet, ValidateOptions
from sandbox_service.results import (
    EvalResult, InductorResult, InductorStatus, InputSetReport, Status, ValidationResult, ValidationStatus,
)

FAMILIES = ("relu", "rowsum", "softmax", "broken", "flaky", "gelu", "tanh", "twin")
SPLITS = {"gelu": "heldout", "tanh": "val"}
SIZES = tuple(range(4, 40))
RL_FAMILIES = (*FAMILIES, "sigmoid")
RL_SIZES = tuple(range(4, 4000, 4))
REFERENCE = """import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.{op}(x){extra}


def get_inputs():
    return [torch.randn({size}, 8)]


def get_init_inputs():
    return []
"""
TWIN_CODE = REFERENCE.format(op="abs", extra="", size=3)


class Family:
    def __init__(self, name: str):
        self.name = name
        self.category = "elementwise"
        self.is_composition = False


def fake_generate(seed: int, count: int, scale: str = "full", families: Sequence[str] | None = None
                  ) -> list[GeneratedTask]:
    rng = random.Random(seed)
    names = list(families or FAMILIES)
    return [make_task(rng.choice(names), rng.choice(SIZES), f"{seed:x}-{i}", scale) for i in range(count)]


def round_robin_generate(seed: int, count: int, scale: str = "full", families: Sequence[str] | None = None
                         ) -> list[GeneratedTask]:
    """Task i from families[i % n], as the engine's generator draws them."""
    names = list(families or FAMILIES)
    rng = random.Random(seed)
    return [make_task(names[i % len(names)], rng.choice(SIZES), f"{seed:x}-{i}", scale) for i in range(count)]


def make_task(family: str, size: int, suffix: str, scale: str) -> GeneratedTask:
    if family == "twin":
        code = TWIN_CODE
    else:
        extra = {"broken": "  # BAD_REF", "flaky": "  # FLAKY"}.get(family, "")
        code = REFERENCE.format(op=family, extra=extra, size=size)
    solution = None
    if family != "softmax":
        kernel = f"# ModelNew for {family} {size}" + ("\n# BAD_KERNEL" if family == "rowsum" and size % 5 == 2 else "")
        solution = TeacherSolution(plan=f"One program per block of {family}.", code=kernel)
    inputs = (InputSet("wide", f"def get_inputs():\n    return [torch.randn({size}, 16)]\n"),)
    return GeneratedTask(
        task_id=f"{family}-{suffix}", family=family, ops=(family,), composition=False, difficulty="easy",
        dtype="float32", scale=scale, code=code, input_sets=inputs, solution=solution, params={"size": size},
    )


def fake_splitter(heldout: Sequence[str] | None, val: Sequence[str] | None):
    """Like the engine's split plan: a family list given for a split replaces that split's defaults."""
    held = set(heldout) if heldout is not None else {f for f, s in SPLITS.items() if s == "heldout"}
    vals = set(val) if val is not None else {f for f, s in SPLITS.items() if s == "val"}

    def split_of(task: GeneratedTask) -> str:
        if task.family == "sigmoid" and task.params["size"] % 4 == 0:
            return "rl"
        return "heldout" if task.family in held else "val" if task.family in vals else "train"

    return split_of


def fake_split_generator(heldout: Sequence[str] | None, val: Sequence[str] | None, split: str):
    """Draws only the rl split (sigmoid at sizes divisible by 4), as the engine's split generator does."""
    assert split == "rl", split

    def generate(seed: int, count: int, scale: str = "full", families: Sequence[str] | None = None
                 ) -> list[GeneratedTask]:
        if "sigmoid" not in (families or RL_FAMILIES):
            raise ValueError("no family (or recipe) is left to generate from")
        rng = random.Random(seed)
        return [make_task("sigmoid", rng.choice(RL_SIZES), f"{seed:x}-{i}", scale) for i in range(count)]

    return generate


def rl_list_families() -> list[Family]:
    return [Family(name) for name in RL_FAMILIES]


def fake_list_families() -> list[Family]:
    return [Family(name) for name in FAMILIES]


class Hit:
    def __init__(self, problem: str):
        self.problem = problem
        self.matcher = "ast-hash"


class FakeDecontaminator:
    """Matches a reference identical to one of the sources ({key: source})."""

    def __init__(self, sources: dict[str, str]):
        self.by_code = {code: key for key, code in sources.items()}

    def match(self, source: str) -> Hit | None:
        return Hit(self.by_code[source]) if source in self.by_code else None


FAKE_ENGINE = Engine(fake_generate, fake_list_families, FakeDecontaminator, fake_splitter)
RL_ENGINE = Engine(fake_generate, rl_list_families, FakeDecontaminator, fake_splitter, fake_split_generator)


def corpus(found: bool = True) -> Corpus:
    """A one-problem "KernelBench" holding TWIN_CODE (or none found)."""
    if not found:
        return Corpus("/nowhere/kernelbench.jsonl", (), found=False)
    return Corpus("fake-kernelbench", (Problem(1, 42, "42_Abs", TWIN_CODE),), found=True)


class FakeTokens:
    """Counts words instead of tokens."""

    name = "fake-words"

    def count(self, messages, completion):
        return sum(len(m["content"].split()) for m in messages), len(completion.split()) + 1


class Interrupt(RuntimeError):
    """Raised by the fake client to cut a build short."""


class FakeClient:
    """Validates and verifies by markers in the text; records what it was asked.

    fail_on_call: raise Interrupt on the n-th call (validate or evaluate, counted from 1).
    infra_always: references containing this text get infra_error every time.
    with_inductor: Inductor answers with a module (except for rowsum: failed); else unavailable.
    """

    def __init__(self, fail_on_call: int | None = None, infra_always: str | None = None,
                 with_inductor: bool = False):
        self.fail_on_call = fail_on_call
        self.infra_always = infra_always
        self.with_inductor = with_inductor
        self.calls = 0
        self.validations: Counter[str] = Counter()
        self.batches: list[int] = []  # the size of each validate_batch call
        self.evaluated: list[tuple[str, tuple[InputSet, ...], EvalOptions]] = []
        self._lock = threading.Lock()

    def _count(self) -> None:
        with self._lock:
            self.calls += 1
            if self.fail_on_call is not None and self.calls == self.fail_on_call:
                raise Interrupt(f"injected failure on call {self.calls}")

    def validate(self, reference: str, input_sets: Sequence[InputSet] = (),
                 options: ValidateOptions | None = None) -> ValidationResult:
        self._count()
        with self._lock:
            self.validations[reference] += 1
            first = self.validations[reference] == 1
        if (self.infra_always and self.infra_always in reference) or ("# FLAKY" in reference and first):
            return ValidationResult(ValidationStatus.INFRA_ERROR, "worker lost")
        if "BAD_REF" in reference:
            return ValidationResult(ValidationStatus.INVALID, "outputs are constant (degenerate)", "fake", "cpu")
        reports = [InputSetReport("default", True, peak_memory_mb=1.5),
                   *(InputSetReport(s.name, True, peak_memory_mb=2.0) for s in input_sets)]
        return ValidationResult(ValidationStatus.OK, "", "fake", "cpu", reports)

    def validate_batch(self, items: Sequence[tuple[str, Sequence[InputSet]]],
                       options: ValidateOptions | None = None) -> list[ValidationResult]:
        with self._lock:
            self.batches.append(len(items))
        return [self.validate(reference, input_sets, options) for reference, input_sets in items]

    def evaluate(self, reference: str, candidate: str, options: EvalOptions | None = None, *,
                 input_sets: Sequence[InputSet] = ()) -> EvalResult:
        self._count()
        with self._lock:
            self.evaluated.append((candidate, tuple(input_sets), options))
        if "BAD_KERNEL" in candidate:
            return EvalResult(Status.INCORRECT, valid=True, compiled=True, trials=2, error="max abs error 3.0")
        return EvalResult(Status.OK, correct=True, valid=True, compiled=True, trials=2, trials_passed=2,
                          max_abs_error=0.0, backend="fake", device="cpu")

    def inductor(self, reference: str, options: InductorOptions | None = None) -> InductorResult:
        if not self.with_inductor:
            return InductorResult(InductorStatus.UNAVAILABLE, reason="no Inductor in the fake")
        if "rowsum" in reference:
            return InductorResult(InductorStatus.FAILED, reason="lowering failed: aten.sum")
        return InductorResult(InductorStatus.OK, source="# ModelNew from Inductor", kernels=1)


def settings(gpu: bool = False, concurrency: int = 4, **data) -> BuildSettings:
    values = {"scale": "cpu", "sft_pairs": 20, "rl_tasks": 30, "chunk_size": 16, "max_tokens": 10_000, **data}
    return BuildSettings(DataSection(**values), trials=2, timeout_s=60.0, concurrency=concurrency, gpu=gpu)


def run_build(run_dir: Path, client: FakeClient | None = None, found: bool = True, gpu: bool = False,
              concurrency: int = 4, engine: Engine = FAKE_ENGINE, **data) -> BuildResult:
    """A build with the fake engine, tokens and corpus (and a fresh FakeClient unless one is given)."""
    return build(settings(gpu, concurrency, **data), run_dir, client or FakeClient(), engine, FakeTokens(),
                 corpus(found), progress=False)


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]
