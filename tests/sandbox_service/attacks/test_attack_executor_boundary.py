"""The executor's boundary: the candidate's Python runs without the GPU or input values and hands over a launch
program; only the trusted executor runs it, and only what the program may say (Triton kernels that are only
Triton, PyTorch operators the policy allows). Written against the design, from the attacker's side: each runs
with the static layer skipped (`run_isolated`), so the boundary holds on its own.

Property: nothing here comes back `ok`; each says why with the rule that caught it; and no candidate Python
runs in a trusted process (its `attempted-` line would show in the output)."""

from __future__ import annotations

from attack_support import (FAST, RELU, assert_not_ok, attempted, candidate, dedicated_lane, describe,
                            lane_still_judges)
from sandbox_service.evaluation import run_isolated
from sandbox_service.lane import EXECUTOR_DESIGN
from sandbox_service.results import Status


def executor_lane():
    return dedicated_lane(design=EXECUTOR_DESIGN)


def _rules(result) -> set[str]:
    return {v.rule for v in result.violations}


def test_torch_computing_the_answer_in_forward_is_refused_by_the_executor():
    with executor_lane() as lane:
        result = run_isolated(RELU, candidate("torch_relu_in_forward"), FAST, lane)
    assert result.status == Status.CHEAT, describe(result)
    assert "torch-compute-in-forward" in _rules(result), describe(result)


def test_a_kernel_naming_plain_python_is_not_compiled_by_trusted_code():
    """An honest tracer says the interface cannot carry it; a forged program naming it anyway is refused by the
    executor's kernel check (executor/test_kernels.py)."""
    with executor_lane() as lane:
        result = run_isolated(RELU, candidate("kernel_calls_python"), FAST, lane)
    assert result.status == Status.RUNTIME_ERROR and result.error.startswith("unsupported:"), describe(result)
    assert "python-in-executor" not in attempted(result), describe(result)


def test_a_kernel_reaching_os_through_triton_s_modules_is_refused():
    with executor_lane() as lane:
        result = run_isolated(RELU, candidate("kernel_reaches_python_through_triton"), FAST, lane)
    assert result.status == Status.CHEAT, describe(result)
    assert "illegal-kernel" in _rules(result), describe(result)
    assert "shell-in-executor" not in attempted(result), describe(result)


def test_a_program_the_candidate_wrote_itself_is_checked_like_any_other():
    with executor_lane() as lane:
        result = run_isolated(RELU, candidate("writes_its_own_program"), FAST, lane)
        assert "forged-program" in attempted(result), describe(result)
        assert result.status == Status.CHEAT, describe(result)
        assert "torch-compute-in-forward" in _rules(result), describe(result)
        assert lane_still_judges(lane) is None


def test_answers_precomputed_from_the_evaluation_seed_do_not_match_the_secret_trials():
    with executor_lane() as lane:
        result = run_isolated(RELU, candidate("precomputes_the_answer"), FAST, lane)
    assert "precomputed-answers" in attempted(result), describe(result)
    assert_not_ok(result)


def test_a_value_read_back_to_the_host_gets_a_verdict_that_says_the_interface_cannot_express_it():
    with executor_lane() as lane:
        result = run_isolated(RELU, candidate("reads_a_value_to_the_host"), FAST, lane)
    assert result.status == Status.RUNTIME_ERROR, describe(result)
    assert result.error.startswith("unsupported:") and "host" in result.error, describe(result)


# The in-process design's open forgeries (test_attack_forged_evidence.py, strict xfails there): under the
# executor design the candidate's process holds no harness, no outputs and no verdict to forge.
def test_reporting_the_references_outputs_through_emit_is_not_ok_under_the_executor():
    with executor_lane() as lane:
        result = run_isolated(RELU, candidate("forges_report_via_emit"), FAST, lane)
    assert_not_ok(result)


def test_frames_with_the_nonce_found_by_the_garbage_collector_are_not_ok_under_the_executor():
    with executor_lane() as lane:
        result = run_isolated(RELU, candidate("forges_frames_with_nonce_from_gc"), FAST, lane)
    assert_not_ok(result)


def test_torch_compute_with_the_monitor_switched_off_is_a_cheat_under_the_executor():
    with executor_lane() as lane:
        result = run_isolated(RELU, candidate("blinds_runtime_monitor"), FAST, lane)
    assert_not_ok(result)
