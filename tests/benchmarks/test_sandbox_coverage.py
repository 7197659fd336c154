"""The coverage benchmark: its CPU dry run end to end (with a fake KernelBench harness), and its
classification, retry and summary logic on made-up verdicts."""

from __future__ import annotations

import json

import pytest

from jaxrl.data.kernelbench import Problem
from sandbox_service.results import ValidationResult, ValidationStatus

from benchmark_scripts import load_benchmark
from fake_harness import ECHO, make_harness

cov = load_benchmark("sandbox_coverage")
kb = load_benchmark("kernelbench_harness")

CODE = "class Model:\n    pass\n\ndef get_inputs():\n    return []\n\ndef get_init_inputs():\n    return []\n"


def test_dry_run_validates_cpu_sized_problems_and_runs_the_harness_on_them(tmp_path, kernelbench_path, capsys):
    out = tmp_path / "coverage.json"
    harness = make_harness(tmp_path, "kb", ECHO)
    code = cov.main(["--dry-run", "--dataset", str(kernelbench_path), "--levels", "1,2", "--limit", "1",
                     "--concurrency", "2", "--kernelbench-harness", str(harness), "--out", str(out)])
    assert code == 0
    document = json.loads(out.read_text())
    assert document["backend"] == "interpreter" and document["dry_run"]
    assert [row["key"] for row in document["rows"]] == ["L1/1", "L2/1"]
    for row in document["rows"]:
        assert row["sandbox"]["status"] == "ok", row["sandbox"]["reason"]
        assert row["sandbox"]["ref_time_us"] is None  # untimed on the interpreter
        assert row["harness"]["correct"]
        assert row["harness"]["metadata"]["argv"] == ["--trials", "1", "--perf-trials", "1", "--no-perf"]
        assert row["harness"]["metadata"]["candidate_has_model_new"]
    summary = document["summary"]
    assert summary["sandbox_status"] == {"ok": 2} and summary["harness_correct"] == 2
    assert summary["gaps"] == [] and summary["target_met"] is True
    printed = capsys.readouterr().out.strip().splitlines()
    assert printed[-1].startswith("TARGET") and "MET" in printed[-1]


def test_bad_input_gives_a_clear_error(tmp_path):
    with pytest.raises(SystemExit, match="no such folder"):
        cov.main(["--dry-run", "--kernelbench-harness", str(tmp_path / "absent")])
    with pytest.raises(SystemExit, match="--sandbox-share"):
        cov.main(["--dry-run", "--sandbox-share", "0"])
    import torch

    if not torch.cuda.is_available():
        with pytest.raises(SystemExit, match="no CUDA GPU visible"):
            cov.main(["--levels", "1", "--limit", "1"])


@pytest.mark.parametrize("reason, expected", [
    ("input set default: out of GPU memory: CUDA out of memory. Tried to allocate 8.00 GiB", "gpu_oom"),
    ("exceeds the memory limit of 16384 MB", "host_memory_limit"),
    ("does not load: NameError: name 'x' is not defined", "load_error"),
    ("input set default: raises: RuntimeError: shape mismatch", "raises"),
    ("input set default: degenerate outputs: a constant would pass the tolerance", "degenerate"),
    ("input set default: not deterministic: the same seed gave different outputs", "not_deterministic"),
    ("input set default: the outputs do not change with the inputs", "ignores_inputs"),
    ("the validator process was killed by SIGSEGV: ...", "crashed"),
    ("something new", "other"),
])
def test_invalid_reasons_are_classified(reason, expected):
    assert cov.reason_class(ValidationResult(ValidationStatus.INVALID, reason=reason)) == expected


def test_timeout_infra_and_ok_are_their_own_classes():
    assert cov.reason_class(ValidationResult(ValidationStatus.TIMEOUT, reason="did not finish")) == "timeout"
    assert cov.reason_class(ValidationResult(ValidationStatus.INFRA_ERROR, reason="x")) == "infra_error"
    assert cov.reason_class(ValidationResult(ValidationStatus.OK)) == "ok"


def _problem(problem_id: int) -> Problem:
    return Problem(1, problem_id, f"{problem_id}_x", CODE)


def test_failures_under_concurrency_run_again_alone():
    problems = [_problem(1), _problem(2), _problem(3)]
    calls: dict[str, int] = {}

    def work(problem):
        calls[problem.key] = calls.get(problem.key, 0) + 1
        if problem.key == "L1/3":
            return None  # the budget ran out while it waited for memory: not run
        return "oom" if problem.key == "L1/2" and calls[problem.key] == 1 else "ok"

    final, replaced = cov.run_phase(work, problems, 2, deadline=float("inf"), retry_alone=lambda r: r == "oom",
                                    describe=str, log=lambda text: None, label="t")
    assert final == {"L1/1": "ok", "L1/2": "ok"} and replaced == {"L1/2": "oom"}
    calls.clear()
    final, replaced = cov.run_phase(work, problems, 1, deadline=float("inf"), retry_alone=lambda r: r == "oom",
                                    describe=str, log=lambda text: None, label="t")
    assert final["L1/2"] == "oom" and replaced == {}  # alone already: nothing to retry


def _ours(status: str, reason_class: str) -> "cov.SandboxOutcome":
    return cov.SandboxOutcome(status, f"{reason_class} reason", reason_class, None, None, 1.0)


def _theirs(correct: bool, metadata: dict | None = None) -> "kb.HarnessResult":
    return kb.HarnessResult("ran", compiled=True, correct=correct, metadata=metadata or {})


def test_summary_separates_coverage_gaps_from_policy_verdicts_and_judges_the_target():
    rows = [cov.Row(_problem(i)) for i in range(1, 7)]
    rows[0].sandbox, rows[0].harness = _ours("ok", "ok"), _theirs(True)
    rows[1].sandbox, rows[1].harness = _ours("invalid", "gpu_oom"), _theirs(True)  # a gap
    rows[1].sandbox_concurrent = _ours("infra_error", "infra_error")  # counted even though retried alone
    rows[2].sandbox, rows[2].harness = _ours("invalid", "degenerate"), _theirs(True)  # policy
    rows[3].sandbox, rows[3].harness = _ours("ok", "ok"), _theirs(False, {"correctness_issue": "Output mismatch"})
    rows[4].sandbox = _ours("infra_error", "infra_error")
    rows[4].harness = _theirs(False, {"runtime_error": "CUDA out of memory"})
    # rows[5]: never reached (time budget)
    summary = cov.summarise(rows, harness_run=True, phase_s={"sandbox": 10.0, "harness": 20.0})
    assert summary["sandbox_status"] == {"ok": 2, "invalid": 2, "infra_error": 1}
    assert summary["sandbox_invalid_classes"] == {"gpu_oom": 1, "degenerate": 1}
    assert summary["gaps"] == ["L1/2"] and summary["policy_invalid_harness_correct"] == ["L1/3"]
    assert summary["harness_fails_sandbox_ok"] == ["L1/4"] and summary["both_fail"] == ["L1/5"]
    assert summary["infra_errors"] == ["L1/2", "L1/5"] and summary["cannot_run"] == ["L1/2", "L1/5"]
    assert summary["harness_failed_classes"] == {"mismatch": 1, "oom": 1}
    assert summary["sandbox_retried_alone"] == ["L1/2"] and summary["target_met"] is False
    lines = summary["lines"]
    assert "1 skipped: time budget" in lines[0]
    assert any(line.startswith("WE FAIL TO RUN, HARNESS CORRECT (gaps): L1/2 (gpu_oom") for line in lines)
    assert lines[-1].startswith("TARGET") and "NOT MET" in lines[-1] and "gaps 1, infra_error 2" in lines[-1]
    without_harness = cov.summarise(rows, harness_run=False, phase_s={})
    assert without_harness["target_met"] is None and "not judged" in without_harness["lines"][-1]


def test_the_reference_becomes_a_model_new_the_harness_accepts():
    reference = ("import torch\n\nclass Model(torch.nn.Module):\n    def forward(self, x):\n        return x * 2\n\n"
                 "def get_inputs():\n    return [torch.ones(3)]\n\ndef get_init_inputs():\n    return []\n")
    namespace: dict = {}
    exec(cov.as_model_new(reference), namespace)
    model_new = namespace["ModelNew"]()
    assert issubclass(namespace["ModelNew"], namespace["Model"])
    assert model_new(*namespace["get_inputs"]()).tolist() == [2.0, 2.0, 2.0]


def test_a_harness_that_passes_nothing_does_not_judge_the_target():
    row = cov.Row(_problem(1))
    row.sandbox = _ours("ok", "ok")
    row.harness = kb.HarnessResult("crash", error="exit 3 without a result; stderr: no CUDA GPU visible")
    summary = cov.summarise([row], harness_run=True, phase_s={})
    assert summary["target_met"] is None and "the harness judged no problem correct" in summary["lines"][-1]


def test_the_memory_gate_admits_harness_work_only_while_it_fits_and_unknown_needs_run_alone():
    import threading
    import time

    gate = cov.MemoryGate(100)
    active: dict[str, float] = {}
    seen: list[dict[str, float]] = []
    lock = threading.Lock()

    def work(item):
        name, need = item
        with gate.hold(need):
            with lock:
                active[name] = min(need or 100, 100)  # what the gate holds for it
                seen.append(dict(active))
            time.sleep(0.05)
            with lock:
                del active[name]
        return name

    items = [("a", 60), ("b", 60), ("c", 30), ("unknown", None), ("huge", 500), ("d", 10)]
    assert sorted(name for _, name in kb.bounded_map(work, items, concurrency=6)) == sorted(n for n, _ in items)
    assert all(sum(snapshot.values()) <= 100 for snapshot in seen)
    assert all(len(snapshot) == 1 for snapshot in seen if "unknown" in snapshot or "huge" in snapshot)
    assert any(len(snapshot) > 1 for snapshot in seen)  # the small ones did share


def test_harness_memory_needs_come_from_our_measured_peaks():
    rows = {f"L1/{i}": cov.Row(_problem(i)) for i in (1, 2, 3)}
    rows["L1/1"].sandbox = cov.SandboxOutcome("ok", "", "ok", 10.0, 30000.0, 1.0)
    rows["L1/2"].sandbox = cov.SandboxOutcome("invalid", "out of GPU memory", "gpu_oom", None, 70000.0, 1.0)
    needs = cov.harness_memory_needs(rows)
    assert needs == {"L1/1": 30000.0 + cov.GPU_MEMORY_MARGIN_MB, "L1/2": None, "L1/3": None}


def test_ids_take_lists_and_ranges():
    assert cov.parse_int_list("1-3,7,10-11") == [1, 2, 3, 7, 10, 11]
    with pytest.raises(Exception, match="ranges"):
        cov.parse_int_list("a-b")
