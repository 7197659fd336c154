"""Every corpus candidate through the whole pipeline (format, static, runtime, correctness) on the interpreter.

The manifest says what each must come out as. The one hack that only shape variation could expose is
an expected failure (strict): if the pipeline starts catching it, this test says so.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from sandbox_service.evaluation import evaluate
from sandbox_service.options import EvalOptions
from sandbox_service.results import Status

CORPUS = Path(__file__).resolve().parent
ENTRIES = yaml.safe_load((CORPUS / "manifest.yaml").read_text())["candidates"]
OPTIONS = EvalOptions(trials=3, timeout_s=120)


def _param(entry: dict):
    marks = []
    if entry.get("requires"):
        marks.append(pytest.mark.xfail(strict=True, reason=f"needs {', '.join(entry['requires'])}, not implemented"))
    return pytest.param(entry, id=entry["file"], marks=marks)


@pytest.mark.parametrize("entry", [_param(e) for e in ENTRIES])
def test_candidate_gets_its_expected_verdict(entry, cpu_lane):
    reference = (CORPUS / entry["problem"]).read_text()
    candidate = (CORPUS / entry["file"]).read_text()
    result = evaluate(reference, candidate, OPTIONS, cpu_lane)
    expected = Status(entry["expected_status"])
    assert result.status == expected, (result.status, result.error, [v.rule for v in result.violations])
    if expected == Status.OK:
        assert result.valid and result.correct and not result.violations
    if expected == Status.CHEAT:
        assert not result.valid and result.violations
        caught_by = {v.layer for v in result.violations}
        assert entry["expected_layer"] in caught_by, caught_by
