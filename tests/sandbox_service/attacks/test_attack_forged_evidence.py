"""Attack class 1, forged evidence: the harness (trials, runtime monitor, reporting) runs in the candidate's own
process, so a candidate that reaches its objects reports outputs, fingerprints and violations of its choosing.

Property: a candidate that does not do the work in Triton never comes back `ok`, whatever it reports about
itself. These run through `run_isolated` (no format/static screens): the process isolation must hold on its own.
The last test shows the full pipeline's static layer rejecting the frame walk before anything runs."""

from __future__ import annotations

from attack_support import FAST, RELU, assert_not_ok, candidate, dedicated_lane, describe
from sandbox_service.evaluation import evaluate, run_isolated
from sandbox_service.results import Status


def test_wrong_kernel_reporting_the_references_outputs_through_the_runners_emit_is_not_ok(record_dir):
    """Frame walk to candidate_runner.run, the reference's outputs handed over as its own, a clean outputs_done."""
    with dedicated_lane() as lane:
        result = run_isolated(RELU, candidate("forges_report_via_emit", RECORD_DIR=str(record_dir)), FAST, lane)
    assert_not_ok(result)


def test_wrong_kernel_writing_frames_with_the_nonce_found_by_the_garbage_collector_is_not_ok(record_dir):
    """No frames: gc finds the emit closure (nonce, report descriptor) and the job; raw frames on the descriptor."""
    with dedicated_lane() as lane:
        result = run_isolated(RELU, candidate("forges_frames_with_nonce_from_gc", RECORD_DIR=str(record_dir)),
                              FAST, lane)
    assert_not_ok(result)


def test_torch_compute_hidden_by_raising_the_monitors_launch_depth_is_not_ok(record_dir):
    """torch.relu does the work while the monitor believes a Triton launch is running; a copy kernel follows."""
    with dedicated_lane() as lane:
        result = run_isolated(RELU, candidate("blinds_runtime_monitor", RECORD_DIR=str(record_dir)), FAST, lane)
    assert_not_ok(result)
    assert result.status == Status.CHEAT, describe(result)  # torch did the work: a runtime finding, not luck


def test_full_pipeline_rejects_the_frame_walking_forger_before_it_runs(record_dir):
    """The same forger through `evaluate`: the static layer (frame-introspection) stops it as `cheat`."""
    with dedicated_lane() as lane:
        result = evaluate(RELU, candidate("forges_report_via_emit", RECORD_DIR=str(record_dir)), FAST, lane)
    assert result.status == Status.CHEAT, describe(result)
    assert any(v.layer == "static" for v in result.violations), describe(result)
