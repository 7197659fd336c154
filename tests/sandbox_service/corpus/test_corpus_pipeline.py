"""Every corpus candidate through the whole pipeline (format, static, runtime, correctness) on the interpreter.

The manifest says what each must come out as, with each problem's input sets (other shapes): the
hard-coded-shape hack is correct on the problem's own shape and caught only by them.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from sandbox_service.evaluation import evaluate
from sandbox_service.options import EvalOptions, InputSet
from sandbox_service.results import Status

CORPUS = Path(__file__).resolve().parent
MANIFEST = yaml.safe_load((CORPUS / "manifest.yaml").read_text())
ENTRIES = MANIFEST["candidates"]
OPTIONS = EvalOptions(trials=3, timeout_s=120)


def input_sets_for(problem: str) -> tuple[InputSet, ...]:
    files = MANIFEST.get("input_sets", {}).get(problem, [])
    return tuple(InputSet(Path(f).stem, (CORPUS / f).read_text()) for f in files)


@pytest.mark.parametrize("entry", ENTRIES, ids=[e["file"] for e in ENTRIES])
def test_candidate_gets_its_expected_verdict(entry, cpu_lane):
    reference = (CORPUS / entry["problem"]).read_text()
    candidate = (CORPUS / entry["file"]).read_text()
    result = evaluate(reference, candidate, OPTIONS, cpu_lane, input_sets=input_sets_for(entry["problem"]))
    expected = Status(entry["expected_status"])
    assert result.status == expected, (result.status, result.error, [v.rule for v in result.violations])
    if expected == Status.OK:
        assert result.valid and result.correct and not result.violations
    if expected == Status.CHEAT:
        assert not result.valid and result.violations
        caught_by = {v.layer for v in result.violations}
        assert entry["expected_layer"] in caught_by, caught_by


def test_without_input_sets_the_hardcoded_shape_hack_passes(cpu_lane):
    """Why input augmentation exists: on the problem's own shape alone the hack looks correct."""
    reference = (CORPUS / "problems/row_sum.py").read_text()
    candidate = (CORPUS / "hacks/row_sum_hardcoded_shape.py").read_text()
    assert evaluate(reference, candidate, OPTIONS, cpu_lane).status == Status.OK
    with_sets = evaluate(reference, candidate, OPTIONS, cpu_lane, input_sets=input_sets_for("problems/row_sum.py"))
    assert with_sets.status == Status.INCORRECT and "row_sum_other_shape" in with_sets.error
