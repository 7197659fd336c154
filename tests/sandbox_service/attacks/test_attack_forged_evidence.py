"""Attack class 1, forged evidence: the harness (trials, runtime monitor, reporting) runs in the candidate's own
process, so a candidate that reaches its objects reports outputs, fingerprints and violations of its choosing.

Property: a candidate that does not do the work in Triton never comes back `ok`, whatever it reports about
itself. Most run through `run_isolated` (no format/static screens): the process isolation must hold on its own.
One forger is written to pass the static layer and goes through the full pipeline (`evaluate`)
(test_attack_static_screen.py shows the static layer rejecting the others before they run)."""

from __future__ import annotations

import pytest

from attack_support import FAST, RELU, assert_not_ok, candidate, dedicated_lane, describe
from sandbox_service.evaluation import evaluate, run_isolated
from sandbox_service.lane import EXECUTOR_DESIGN, IN_PROCESS_DESIGN
from sandbox_service.results import Status

# Under the executor design (the default) the candidate's process holds no harness, no outputs and no verdict.
# With the in-process design these forgeries still work (docs/security.md): strict xfails there.
HARNESS_IN_THE_CANDIDATE_PROCESS = pytest.mark.xfail(
    strict=True, reason="the in-process design: the harness and its reporting run inside the candidate's process")
DESIGNS = [EXECUTOR_DESIGN, pytest.param(IN_PROCESS_DESIGN, marks=HARNESS_IN_THE_CANDIDATE_PROCESS)]


@pytest.mark.parametrize("design", DESIGNS)
def test_wrong_kernel_reporting_the_references_outputs_through_the_runners_emit_is_not_ok(design):
    """Frame walk to candidate_runner.run, the reference's outputs handed over as its own, a clean outputs_done."""
    with dedicated_lane(design=design) as lane:
        result = run_isolated(RELU, candidate("forges_report_via_emit"), FAST, lane)
    assert_not_ok(result)


@pytest.mark.parametrize("design", DESIGNS)
def test_wrong_kernel_writing_frames_with_the_nonce_found_by_the_garbage_collector_is_not_ok(design):
    """No frames: gc finds the emit closure (nonce, report descriptor) and the job; raw frames on the descriptor."""
    with dedicated_lane(design=design) as lane:
        result = run_isolated(RELU, candidate("forges_frames_with_nonce_from_gc"),
                              FAST, lane)
    assert_not_ok(result)


@pytest.mark.parametrize("design", DESIGNS)
def test_torch_compute_hidden_by_switching_the_monitor_off_is_not_ok(design):
    """torch.relu does the work while the monitor believes a Triton launch is running; a copy kernel follows."""
    with dedicated_lane(design=design) as lane:
        result = run_isolated(RELU, candidate("blinds_runtime_monitor"), FAST, lane)
    assert_not_ok(result)
    if design == IN_PROCESS_DESIGN:  # torch did the work: a runtime finding, not luck (the executor has no monitor)
        assert result.status == Status.CHEAT, describe(result)


def test_wrong_kernel_forging_its_report_past_the_static_layer_is_not_ok():
    """The full pipeline: traceback -> frames through getattr with computed names, in __init__ (no monitor scope);
    the reference's outputs reported as every trial's and a clean outputs_done."""
    with dedicated_lane() as lane:
        result = evaluate(RELU, candidate("forges_report_past_the_static_layer"), FAST, lane)
    assert_not_ok(result)
