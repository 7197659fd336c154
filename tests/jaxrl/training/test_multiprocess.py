"""Several processes are one run: 2 processes with 4 CPU devices each (joined through the JAXRL_* variables,
gloo collectives) train and checkpoint as 1 process with 8 devices does.

Each run is multiprocess_worker.py in fresh interpreters: 3 SFT steps of tiny Qwen3 on an fsdp mesh over
all 8 devices, then a checkpoint saved and restored. The single process also restores the two-process
checkpoint.
"""

from __future__ import annotations

import numpy as np
import pytest
from multiprocess_harness import SCALED_TOLERANCE, arrays, assert_close, assert_equal, run_workers
from multiprocess_worker import STEPS

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """(results of each of the 2 processes, results of the single process)."""
    root = tmp_path_factory.mktemp("multiprocess")
    two = run_workers(root / "two", processes=2, devices_each=4)
    (one,) = run_workers(root / "one", 1, 8, str(root / "two" / "checkpoints"))
    return two, one


def test_two_processes_form_one_mesh_of_eight_devices(runs):
    two, one = runs
    for result in two:
        assert (result["process_count"], result["device_count"]) == (2, 8)
        assert (result["kernel_devices"], result["kernel_local_shards"]) == (8, 4)  # sharded across both
    assert (one["process_count"], one["device_count"], one["kernel_devices"], one["kernel_local_shards"]) == (1, 8, 8, 8)
    assert np.array_equal(two[0]["losses"], two[1]["losses"])  # every process logs the same step metrics


def test_two_processes_train_as_one_process_with_eight_devices(runs):
    two, one = runs
    assert len(one["losses"]) == STEPS and one["losses"][-1] < one["losses"][0]  # it did train
    for result in two:
        np.testing.assert_allclose(result["losses"], one["losses"], rtol=SCALED_TOLERANCE)
        np.testing.assert_allclose(result["grad_norms"], one["grad_norms"], rtol=SCALED_TOLERANCE)
        assert_close(arrays(result, "trained"), arrays(one, "trained"))


def test_a_checkpoint_saved_by_two_processes_restores_exactly_on_two_or_one(runs):
    two, one = runs
    for result in two:
        assert_equal(arrays(result, "restored"), arrays(result, "trained"))
        assert result["restored_position"].tolist() == [1, 4]  # 3 batches of 4 of the 8 examples
    assert_equal(arrays(one, "foreign"), arrays(two[0], "trained"))
