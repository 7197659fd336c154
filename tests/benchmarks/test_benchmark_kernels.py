"""The sandbox throughput benchmark: its hand-written candidates and its measures.

Every candidate in benchmarks/kernels/level1 must be `ok` through the real sandbox (format, static,
runtime and correctness layers, strict policy) under the Triton interpreter: once against the
CPU-sized variant of its problem, and, where the CPU-sized shapes fit in one block or tile, once more
on shapes that reach the multi-block paths (several split-K chunks, output tiles, row chunks).
Timing is skipped on the CPU; the benchmark's formulas are checked on made-up results instead.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from jaxrl.data.kernelbench import load_problems
from sandbox_service.evaluation import evaluate_local
from sandbox_service.options import EvalOptions
from sandbox_service.results import EvalResult, LayerResult, Outcome, Status, TimingStats

from benchmark_scripts import load_benchmark
from fake_harness import ECHO, make_harness

REPO_ROOT = Path(__file__).resolve().parents[2]
KERNELS = REPO_ROOT / "benchmarks" / "kernels" / "level1"
CANDIDATES = sorted(KERNELS.glob("*.py"), key=lambda p: int(p.name.split("_")[0]))
# Two trials keep the interpreter quick; the protocol's default (5) runs on the GPU.
FAST = EvalOptions(trials=2, timeout_s=120, memory_limit_mb=4096)


def _load_benchmark():
    return load_benchmark("sandbox_throughput")


bench = _load_benchmark()


def _problem_id(path: Path) -> int:
    return int(path.name.split("_")[0])


def _candidate(problem_id: int) -> str:
    (path,) = [p for p in CANDIDATES if _problem_id(p) == problem_id]
    return path.read_text()


def _evaluate(reference: str, candidate: str) -> EvalResult:
    return evaluate_local(reference, candidate, FAST, "interpreter")


def _assert_ok(result: EvalResult) -> None:
    why = result.error or "; ".join(f"{v.rule}: {v.message}" for v in result.violations)
    assert result.status == Status.OK, f"{result.status.value}: {why}"
    assert result.valid and result.correct and result.triton_launches > 0


def _resized(code: str, replacements: dict[str, str]) -> str:
    """The full problem with some size definitions replaced; each must occur exactly once."""
    for old, new in replacements.items():
        assert code.count(old) == 1, f"{old!r} occurs {code.count(old)} times in the problem"
        code = code.replace(old, new)
    return code


@pytest.mark.parametrize("path", CANDIDATES, ids=lambda p: p.stem)
def test_candidate_is_ok_on_the_cpu_sized_problem(path, kernelbench_path):
    (problem,) = load_problems(kernelbench_path, levels=[1], ids=[_problem_id(path)], cpu_sized=True)
    _assert_ok(_evaluate(problem.code, path.read_text()))


# Shapes beyond one block/tile, for candidates whose CPU-sized problem fits in one.
MULTI_BLOCK = {
    "6-eight-split-k-chunks": (6, {"M = 256": "M = 16", "N = 256": "N = 16", "K = 131072 * 4": "K = 2048"}),
    "8-three-by-three-tiles": (8, {"M = 8205": "M = 300", "K = 2949": "K = 70", "N = 5921": "N = 260"}),
    "12-row-and-column-blocks": (12, {"M = 4096": "M = 600", "N = 4096": "N = 20"}),
    "23-rows-longer-than-a-block": (23, {"batch_size = 4096": "batch_size = 2", "dim = 393216": "dim = 5000"}),
    "40-two-row-chunks-last-partial": (
        40,
        {"batch_size = 16": "batch_size = 2", "features = 64": "features = 3",
         "dim1 = 256": "dim1 = 37", "dim2 = 256": "dim2 = 41"},
    ),
    "47-partial-reduced-and-inner-blocks": (
        47, {"batch_size = 128": "batch_size = 2", "dim1 = 4096": "dim1 = 37", "dim2 = 4095": "dim2 = 300"}
    ),
    "50-three-pixel-tiles": (50, {"batch_size = 256": "batch_size = 4", "224, 224": "40, 40"}),
    "95-classes-longer-than-a-block": (
        95, {"batch_size = 32768": "batch_size = 3", "num_classes = 4096": "num_classes = 5000"}
    ),
    "98-several-partial-sums": (
        98, {"batch_size = 8192 * 2": "batch_size = 4", "input_shape = (8192 * 2,)": "input_shape = (3000,)"}
    ),
}


@pytest.mark.parametrize("case", sorted(MULTI_BLOCK), ids=str)
def test_candidate_is_ok_on_multi_block_shapes(case, kernelbench_path):
    problem_id, replacements = MULTI_BLOCK[case]
    (problem,) = load_problems(kernelbench_path, levels=[1], ids=[problem_id])
    _assert_ok(_evaluate(_resized(problem.code, replacements), _candidate(problem_id)))


def test_candidates_cover_the_required_kinds_of_problem(kernelbench_rows):
    names = {row["problem_id"]: row["name"] for row in kernelbench_rows if row["level"] == 1}
    found = bench.discover_candidates(KERNELS)
    assert len(found) >= 10
    assert set(found) <= set(names), "every candidate must name a level-1 problem id"
    assert bench.build_parser().parse_args([]).ids is None  # by default every candidate, 19, 23 and 47 included
    assert {19, 23, 47} <= set(found)
    for path in found.values():  # a complete module each; the sandbox's layers judge the rest
        text = path.read_text()
        assert "@triton.jit" in text and "class ModelNew" in text


def test_load_cases_pairs_problems_with_candidates_by_id(kernelbench_path):
    cases = bench.load_cases(kernelbench_path, KERNELS, [40, 1], cpu_sized=False)
    assert [c.problem_id for c in cases] == [1, 40]
    assert cases[0].name == "1_Square_matrix_multiplication_" and "N = 2048 * 2" in cases[0].reference
    assert cases[1].candidate == _candidate(40)
    with pytest.raises(ValueError, match="no candidate"):
        bench.load_cases(kernelbench_path, KERNELS, [2], cpu_sized=False)


def _timed(ref_us: float, cand_us: float, duration_s: float) -> EvalResult:
    def stats(median):
        return TimingStats(median_us=median, mean_us=median, std_us=0.0, min_us=median, max_us=median, runs=100)

    return EvalResult(Status.OK, ref_time_us=ref_us, candidate_time_us=cand_us, ref_timing=stats(ref_us),
                      candidate_timing=stats(cand_us), duration_s=duration_s)


def test_overhead_is_duration_minus_all_timed_runs_of_both_models():
    options = EvalOptions(warmup_runs=3, timing_runs=100)
    result = _timed(ref_us=1000.0, cand_us=500.0, duration_s=2.0)
    assert bench.timed_work_s(result, options) == pytest.approx(103 * 1500e-6)
    assert bench.overhead_s(result, options) == pytest.approx(2.0 - 0.1545)
    untimed = EvalResult(Status.OK, duration_s=3.0)
    assert bench.timed_work_s(untimed, options) == 0.0 and bench.overhead_s(untimed, options) == 3.0


def test_overhead_splits_into_until_verdict_and_the_timing_phase():
    options = EvalOptions(warmup_runs=3, timing_runs=100)
    result = _timed(ref_us=1000.0, cand_us=500.0, duration_s=4.0)
    result.layers = [
        LayerResult("compile", Outcome.PASSED, 1.0),
        LayerResult("runtime", Outcome.PASSED, 1.5),
        LayerResult("correctness", Outcome.PASSED, 0.5),
    ]
    assert bench.until_verdict_s(result) == 3.0
    assert bench.timing_phase_overhead_s(result, options) == pytest.approx(4.0 - 3.0 - 0.1545)
    result.layers = result.layers[1:]  # a verdict without its compile layer cannot be split
    assert bench.until_verdict_s(result) is None
    assert bench.until_verdict_s(EvalResult(Status.CHEAT)) is None


class _FakeClient:
    """Answers like SandboxClient; raises for the problem ids in `broken`."""

    def __init__(self, broken=()):
        self.broken = set(broken)
        self.calls = []

    def evaluate(self, reference, candidate, options=None, *, timeout_s=None, request_id=""):
        self.calls.append(request_id)
        if reference in self.broken:
            raise RuntimeError("connection reset")
        return EvalResult(Status.OK, duration_s=0.5)

    def evaluate_many(self, pairs, *, max_concurrency=None):
        for index, pair in enumerate(pairs):
            if pair.reference in self.broken:
                raise RuntimeError("stream broken")
            yield index, EvalResult(Status.OK, duration_s=0.5)


def _cases(*ids):
    return [bench.Case(i, f"{i}_x", reference=i, candidate="", candidate_file=f"{i}_x.py") for i in ids]


def test_a_failing_evaluation_becomes_an_infra_error_record_and_the_run_goes_on():
    client = _FakeClient(broken={2})
    records, skipped = bench.run_sequential(client, _cases(1, 2, 3), FAST, repeats=2, log=lambda text: None)
    assert skipped == 0
    # rounds: every pair once, then again
    assert client.calls == [f"sequential-{i}-{r}" for r in range(2) for i in (1, 2, 3)]
    assert [r.result.status for r in records if r.problem_id == 2] == [Status.INFRA_ERROR] * 2
    assert "connection reset" in records[1].result.error
    assert all(r.ok for r in records if r.problem_id != 2)
    concurrent, _ = bench.run_concurrent(_FakeClient(broken={2}), _cases(1, 2, 3), FAST)
    assert [r.result.status for r in concurrent] == [Status.OK, Status.INFRA_ERROR, Status.INFRA_ERROR]


def test_time_budget_stops_new_sequential_evaluations():
    client = _FakeClient()
    records, skipped = bench.run_sequential(client, _cases(1, 2), FAST, repeats=3, log=lambda text: None,
                                            deadline=time.monotonic() - 1)
    assert records == [] and skipped == 6 and client.calls == []


def test_coefficient_of_variation_is_sample_std_over_mean():
    assert bench.coefficient_of_variation([98.0, 100.0, 102.0]) == pytest.approx(0.02)
    assert bench.coefficient_of_variation([5.0]) is None


def test_stability_flags_only_slow_kernels_that_vary_more_than_two_percent():
    def records(ref_times, cand_times):
        pairs = enumerate(zip(ref_times, cand_times))
        return [bench.Record(1, "sequential", i, 1.0, _timed(r, c, 1.0)) for i, (r, c) in pairs]

    steady = bench.stability(records([1000.0, 1001.0, 999.0], [200.0, 201.0, 199.0]))
    assert steady["flags"] == [] and steady["cv_ref"] == pytest.approx(0.001)
    noisy = bench.stability(records([1000.0, 1100.0, 900.0], [50.0, 60.0, 40.0]))  # 50 us: below the 100 us bar
    assert len(noisy["flags"]) == 1 and noisy["flags"][0].startswith("reference")
    failed = bench.Record(1, "sequential", 3, 1.0, EvalResult(Status.RUNTIME_ERROR, duration_s=1.0))
    assert bench.stability(records([1000.0, 1000.0], [200.0, 200.0]) + [failed])["repeats_timed"] == 2


def test_reference_times_are_compared_with_the_published_ones():
    options = EvalOptions(warmup_runs=3, timing_runs=100)
    records = [bench.Record(pid, "sequential", i, 3.0, _timed(ref, 100.0, 3.0))
               for i in range(2) for pid, ref in ((1, 2000.0), (12, 60.0))]
    baselines = {"H100_Modal": {"1_x": 2000.0, "12_x": 2680.0}}
    rows = bench.problem_rows(_cases(1, 12), [], records, baselines, options)
    assert [row["ratio_to_published"]["H100_Modal"] for row in rows] == pytest.approx([1.0, 60.0 / 2680.0])
    summary = bench.summarise(None, [], 1.0, records, 0, rows, options)
    assert summary["ratios_far_from_published"] == ["L1/12 x0.02 vs H100_Modal"]


def test_published_baselines_are_h100_eager_times_in_microseconds(kernelbench_path):
    tables = bench.load_baselines(kernelbench_path.parent / "kernelbench_baseline_times")
    assert set(tables) == {"H100_Modal", "H100_PCIe_LambdaLabs"}  # torch.compile files are not the reference
    assert tables["H100_Modal"]["1_Square_matrix_multiplication_"] == pytest.approx(2660.0)
    assert len(tables["H100_Modal"]) == 100


def test_dry_run_on_cpu_writes_every_phase(tmp_path, kernelbench_path, capsys):
    out = tmp_path / "bench.json"
    harness = make_harness(tmp_path, "kb", ECHO)
    argv = ["--dry-run-cpu", "--ids", "12", "--repeats", "2", "--dataset", str(kernelbench_path), "--out", str(out),
            "--kernelbench-harness", str(harness)]
    code = bench.main(argv)
    assert code == 0
    document = json.loads(out.read_text())
    assert document["warmup"]["result"]["status"] == "ok"
    assert [r["result"]["status"] for r in document["concurrent"]] == ["ok"]
    assert [r["repeat"] for r in document["sequential"]] == [0, 1]
    (row,) = document["problems"]
    assert row["problem_id"] == 12 and row["sequential_statuses"] == ["ok", "ok"]
    # untimed on the CPU: the whole duration counts as overhead
    assert document["sequential"][0]["overhead_s"] == document["sequential"][0]["result"]["duration_s"]
    assert document["summary"]["not_ok"] == 0 and document["summary"]["evaluations_per_minute"] > 0
    # the harness ran the same candidate once, with the same trials and timed runs, one fresh process
    (harness_result,) = document["harness_results"].values()
    assert harness_result["correct"] and harness_result["metadata"]["argv"] == ["--trials", "2", "--perf-trials", "3"]
    comparison = document["summary"]["harness"]
    assert comparison["ratio"] > 0 and comparison["verdicts"][0]["agree"]
    assert row["harness"]["harness"] == "correct"
    assert "x the harness (target >= 10x" in capsys.readouterr().out


def _harness_phase(results: dict, wall_s: float, skipped: int = 0):
    return bench.HarnessPhase(results, wall_s, skipped)


def test_harness_comparison_reports_both_rates_their_ratio_and_verdicts_side_by_side():
    kb = load_benchmark("kernelbench_harness")
    concurrent = [bench.Record(pid, "concurrent", 0, 5.0, EvalResult(status, duration_s=5.0))
                  for pid, status in ((1, Status.OK), (8, Status.OK), (12, Status.INCORRECT))]
    harness = {
        1: kb.HarnessResult("ran", compiled=True, correct=True, runtime_ms=2.5, process_s=12.0, eval_s=8.0),
        8: kb.HarnessResult("ran", compiled=True, correct=False, process_s=14.0, eval_s=10.0,
                            metadata={"correctness_issue": "Output mismatch", "max_difference": ["0.001"]}),
        12: kb.HarnessResult("ran", compiled=True, correct=False, process_s=10.0, eval_s=6.0,
                             metadata={"correctness_issue": "Output mismatch"}),
    }
    # 3 evaluations at once in 6 s (30/min) against 3 one at a time in 36 s (5/min)
    comparison = bench.harness_comparison(_cases(1, 8, 12), concurrent, 6.0, _harness_phase(harness, 36.0))
    assert comparison["sandbox_evaluations_per_minute"] == pytest.approx(30.0)
    assert comparison["harness_evaluations_per_minute"] == pytest.approx(5.0)
    assert comparison["ratio"] == pytest.approx(6.0)
    assert [v["agree"] for v in comparison["verdicts"]] == [True, False, True]
    lines = comparison["lines"]
    assert "mean 12.0 s a process, of which 8.0 s in eval_kernel_against_ref" in lines[0]
    assert "6.0x the harness (target >= 10x: NOT met)" in lines[1]
    assert lines[2].startswith("correctness verdicts agree on 2/3 (KernelBench compares fp32 at atol = rtol = 1e-4")
    assert "L1/8 sandbox ok, harness mismatch: Output mismatch" in lines[2]
    fast = bench.harness_comparison(_cases(1), concurrent[:1], 1.0, _harness_phase({1: harness[1]}, 12.0))
    assert fast["ratio"] == pytest.approx(12.0) and "target >= 10x: met" in fast["lines"][1]
    # a harness that did not give every candidate a verdict does not judge the target
    skipped = bench.harness_comparison(_cases(1), concurrent[:1], 1.0, _harness_phase({1: harness[1]}, 12.0, 2))
    assert "not judged: 0 harness evaluation(s) crashed or timed out, 2 not run" in skipped["lines"][1]
    crashed = kb.HarnessResult("crash", error="exit 3 without a result; stderr: no CUDA GPU visible", process_s=3.0)
    broken = bench.harness_comparison(_cases(1), concurrent[:1], 1.0, _harness_phase({1: crashed}, 3.0))
    assert "not judged: 1 harness evaluation(s) crashed" in broken["lines"][1]
    assert "1e-4" not in broken["lines"][2] and "harness crash: exit 3" in broken["lines"][2]


def test_the_table_shows_each_problem_s_harness_verdict(capsys):
    options = EvalOptions(warmup_runs=3, timing_runs=100)
    records = [bench.Record(1, "sequential", i, 3.0, _timed(2000.0, 100.0, 3.0)) for i in range(2)]
    rows = bench.problem_rows(_cases(1, 12), [], records, {}, options)
    rows[0]["harness"] = {"harness": "correct", "harness_runtime_ms": 2.5}
    rows[1]["harness"] = None
    bench.print_table(rows, {"lines": ["last line"]}, [])
    printed = capsys.readouterr().out.splitlines()
    assert "kernelbench harness" in printed[1]
    assert printed[2].rstrip().endswith("correct                     2.500")
    assert "not run" in printed[3] and printed[-1] == "last line"
