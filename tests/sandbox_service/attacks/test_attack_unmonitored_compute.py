"""Attack class 2, compute the runtime monitor does not see: torch work done while a Triton launch is in progress
(the grid callable runs inside the launch, where the monitor ignores operators), and torch work done by a helper
process that reads the inputs and writes the results through shared memory.

Property: a candidate that does not do the work in Triton never comes back `ok`; nothing it started is alive
after its evaluation."""

from __future__ import annotations

from attack_support import (
    FAST, RELU, assert_not_ok, assert_properties, attempted, candidate, dedicated_lane, describe, not_ok,
    nothing_survives,
)
from sandbox_service.evaluation import evaluate, run_isolated


def test_grid_callable_computing_with_torch_inside_the_launch_is_not_ok():
    """torch.relu in the grid callable (the static layer would flag it: run_isolated shows the runtime layer alone)."""
    with dedicated_lane() as lane:
        result = run_isolated(RELU, candidate("grid_callable_computes_with_torch"), FAST, lane)
    assert_not_ok(result)


def test_grid_callable_computing_on_staged_tensors_passes_the_screens_and_is_not_ok():
    """The full pipeline: the grid callable pops (input, output) from a module-level list and runs
    `out.copy_(x).relu_()`; the static layer does not type them as tensors, the monitor is inside a launch."""
    with dedicated_lane() as lane:
        result = evaluate(RELU, candidate("grid_callable_computes_on_staged_tensors"), FAST, lane)
    assert_not_ok(result)


def test_helper_process_computing_through_shared_memory_is_not_ok_and_dies_with_the_candidate():
    """A forked helper computes torch.relu on shared buffers; the candidate's process runs only copy kernels."""
    with dedicated_lane() as lane:
        result = run_isolated(RELU, candidate("helper_process_computes_through_shared_memory"), FAST, lane)
        survived = nothing_survives()
    assert attempted(result), f"the attack did not run: {describe(result)}"
    assert_properties(not_ok(result), survived)
