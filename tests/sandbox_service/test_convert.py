"""Results and options survive the wire unchanged; unset options take the server's defaults."""

from __future__ import annotations

import pytest

from sandbox_service.convert import options_from_pb, options_to_pb, result_from_pb, result_to_pb
from sandbox_service.options import EvalOptions, Policy
from sandbox_service.results import EvalResult, LayerResult, Outcome, Status, TimingStats, Violation
from tritonrl.sandbox.v1 import sandbox_pb2 as pb


def test_full_result_round_trip():
    timing = TimingStats(median_us=10.5, mean_us=11.0, std_us=0.5, min_us=10.0, max_us=12.0, runs=100, method="device_sync")
    result = EvalResult(
        status=Status.CHEAT,
        correct=False,
        valid=False,
        compiled=True,
        violations=[Violation("static", "torch-compute", "torch.matmul in forward", 12), Violation("runtime", "x", "y")],
        layers=[LayerResult("format", Outcome.PASSED, 0.1, ""), LayerResult("static", Outcome.FAILED, 0.2, "torch-compute")],
        trials=5,
        trials_passed=5,
        max_abs_error=0.0,
        ref_time_us=20.0,
        candidate_time_us=10.5,
        speedup=1.9,
        ref_timing=timing,
        candidate_timing=timing,
        speedup_flagged=True,
        degenerate_reference=True,
        triton_launches=7,
        backend="cuda",
        device="NVIDIA H100",
        error="e",
        stdout_tail="out",
        duration_s=3.25,
    )
    assert result_from_pb(result_to_pb(result)) == result
    assert EvalResult.from_dict(result.to_dict()) == result


def test_unset_numbers_stay_null():
    result = EvalResult(status=Status.OK, correct=True, valid=True)
    back = result_from_pb(result_to_pb(result))
    assert back.speedup is None and back.max_abs_error is None and back.ref_timing is None


def test_options_round_trip_and_defaults():
    options = EvalOptions(trials=3, seed=7, tolerances={"float16": (1e-3, 2e-3)}, time=False, policy="relaxed")
    assert options_from_pb(options_to_pb(options)) == options
    defaults = EvalOptions(trials=9, timeout_s=33)
    partial = pb.EvalOptions(seed=5)
    merged = options_from_pb(partial, defaults)
    assert merged.seed == 5 and merged.trials == 9 and merged.timeout_s == 33 and merged.policy == Policy.STRICT


@pytest.mark.parametrize("field, value", [("trials", 0), ("timeout_s", -1.0), ("policy", "lenient")])
def test_invalid_options_raise(field, value):
    with pytest.raises(ValueError):
        options_from_pb(pb.EvalOptions(**{field: value}))


def test_default_protocol_is_kernelbench_like():
    options = EvalOptions()
    assert options.trials == 5 and options.timing_runs == 100 and options.warmup_runs == 3
    assert options.tolerance_for("float32") == (1e-2, 1e-2) and options.tolerance_for("bfloat16") == (1e-2, 1e-2)
