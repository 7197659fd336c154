"""GRPO on several processes is one run scored once: 2 processes with 4 CPU devices each train as 1 process
with 8 devices does, on process 0's verdicts alone.

Each run is grpo_multiprocess_worker.py in fresh interpreters (the harness of test_multiprocess.py): 2 GRPO
steps of a tiny model whose scorer judges differently on each process, so any verdict not taken from
process 0 shows in the rewards, the update and the parameters.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from grpo_multiprocess_worker import GROUP, STEPS, TASKS
from multiprocess_harness import arrays, assert_close, run_workers

pytestmark = pytest.mark.slow

WORKER = Path(__file__).with_name("grpo_multiprocess_worker.py")
# The metrics computed on the host from the rollout (rewards, rates, lengths): exact when the verdicts
# and completions are the same. The update's metrics are device sums whose order differs between gloo
# and in-process collectives (see SCALED_TOLERANCE in test_multiprocess), so they match to a few float32
# ulps of the summed terms, and those terms are of magnitude ~1 (advantages, ratios): the policy loss is
# their near-cancelling mean (zero-mean advantages), so its error is absolute, not relative to it.
# (Measured: at most 1.2e-7 on a grad norm of 1.5 and 3.7e-9 on a loss of -8.6e-3.)
ROLLOUT_METRICS = ("reward/", "rate/", "length/", "speedup/", "samples")
UPDATE_TOLERANCE = 1e-6


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """(results of each of the 2 processes, results of the single process)."""
    root = tmp_path_factory.mktemp("grpo_multiprocess")
    two = run_workers(root / "two", 2, 4, worker=WORKER)
    (one,) = run_workers(root / "one", 1, 8, worker=WORKER)
    return two, one


def test_only_process_0_calls_its_scorer(runs):
    two, one = runs
    assert [int(result["process_count"]) for result in two] == [2, 2]
    assert [int(result["scorer_calls"]) for result in two] == [STEPS * TASKS * GROUP, 0]
    assert int(one["scorer_calls"]) == STEPS * TASKS * GROUP


def test_both_processes_end_with_the_same_metrics_and_parameters(runs):
    first, second = runs[0]
    assert first.keys() == second.keys()
    for key in first:
        if key != "scorer_calls":
            np.testing.assert_array_equal(second[key], first[key], err_msg=key)


def test_two_processes_train_as_one_process_scored_by_process_0(runs):
    two, one = runs
    assert one["metric.reward/correct_mean"].max() > 0  # process 1's verdicts (all wrong) would give 0
    assert one["metric.train/grad_norm"].min() > 0
    for result in two:
        metrics = [key for key in one if key.startswith("metric.")]
        assert metrics == [key for key in result if key.startswith("metric.")]
        for key in metrics:
            if key.removeprefix("metric.").startswith(ROLLOUT_METRICS):
                np.testing.assert_array_equal(result[key], one[key], err_msg=key)
            else:
                np.testing.assert_allclose(result[key], one[key], rtol=UPDATE_TOLERANCE, atol=UPDATE_TOLERANCE,
                                           err_msg=key)
        assert_close(arrays(result, "params"), arrays(one, "params"))
