"""The honest-code sweep: two corpus pairs through both designs end to end on the interpreter, and its
sources and grouping on their own."""

from __future__ import annotations

import json

import pytest

from sandbox_service.results import EvalResult, Status

from benchmark_scripts import load_benchmark

sweep = load_benchmark("honest_sweep")


@pytest.mark.slow
def test_two_corpus_pairs_through_both_designs_write_the_json(tmp_path, capsys):
    out = tmp_path / "sweep.json"
    assert sweep.main(["--sources", "corpus", "--pairs", "2", "--workers", "1", "--out", str(out)]) == 0
    document = json.loads(out.read_text())
    assert document["designs"] == ["executor", "in-process"] and document["baseline"] == "in-process"
    corpus = document["sources"]["corpus"]
    assert corpus["total"] == 2
    for design in ("executor", "in-process"):
        assert corpus["designs"][design]["evaluated"] == 2
        assert corpus["designs"][design]["ok"] == 2, corpus["designs"][design]["not_ok"]
        assert document["rates"][design]["evaluations_per_minute"] > 0
    assert document["rates"]["ratio_executor_to_in_process"] > 0
    assert document["rates"]["where_both_ok"]["pairs"] == 2
    assert corpus["compared"] == 2 and corpus["executor_only_not_ok"] == []
    assert "executor / in-process (baseline, same job)" in capsys.readouterr().out


def test_sources_are_the_honest_cases_and_the_seeded_teacher_pairs():
    corpus = sweep.corpus_pairs()
    assert len(corpus) >= 10 and all(p.key.startswith("honest/") for p in corpus)
    assert any(p.input_sets for p in corpus)  # the problem with input sets keeps them
    first, notes = sweep.teacher_pairs(5, seed=0)
    again, _ = sweep.teacher_pairs(5, seed=0)
    assert [p.key for p in first] == [p.key for p in again] and len(first) == 5
    assert all(p.completion and p.input_sets and "class ModelNew" in p.candidate for p in first)
    assert notes["seed"] == 0 and notes["scale"] == "cpu"


def test_reasons_group_by_pattern_with_names_and_numbers_masked():
    one = EvalResult(Status.CHEAT, error="the launch program was refused: kernel relu_kernel, line 10: bad\nmore")
    two = EvalResult(Status.CHEAT, error="the launch program was refused: kernel exp_kernel, line 7: bad")
    assert sweep.reason_of(one) == "cheat: the launch program was refused: kernel relu_kernel, line 10: bad"
    assert sweep.pattern_of(sweep.reason_of(one)) == sweep.pattern_of(sweep.reason_of(two)) == \
        "cheat: the launch program was refused: kernel <name>, line <n>: bad"
    assert sweep.kind_of(EvalResult(Status.RUNTIME_ERROR, error="unsupported: .item()")) == "runtime_error/unsupported"
    assert sweep.kind_of(EvalResult(Status.OK)) == "ok"


def test_a_traceback_is_summarised_by_its_exception_and_the_evaluated_code_s_frame():
    error = ("forward (traced): Traceback (most recent call last):\n"
             '  File "/x/sandbox_service/untrusted/candidate.py", line 53, in <lambda>\n    harness.trial_inputs()\n'
             '  File "/tmp/abc/reference.py", line 20, in get_inputs\n    scale = 0.5 + torch.rand(1).item()\n'
             '  File "/v/site-packages/torch/fake.py", line 9, in dispatch\n    raise DataDependentOutputException(func)\n'
             "torch.DataDependentOutputException: aten._local_scalar_dense.default\n")
    assert sweep.reason_of(EvalResult(Status.RUNTIME_ERROR, error=error)) == (
        "runtime_error: forward (traced): torch.DataDependentOutputException: aten._local_scalar_dense.default "
        "(in reference.py, get_inputs: scale = 0.5 + torch.rand(1).item())")
