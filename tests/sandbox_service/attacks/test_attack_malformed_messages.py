"""Attack class 5, one message changes shared state: a candidate that holds the reporting function (frames; see
class 1) sends one malformed output hand-over or verdict message. It must not switch the whole lane from IPC to
file hand-over, crash or restart the judge into an `infra_error`, or turn its own cheat into `infra_error`.

Properties: the sender (a plain PyTorch-compute cheat) comes back neither `ok` nor `infra_error`; the lane's
hand-over setting is what it was; on the same lane the next honest evaluations are `ok` and the next wrong ones
`incorrect`. On the CPU lane no hand-over uses IPC (outputs are not CUDA tensors); the test sets the lane's IPC
threshold as a CUDA lane has it, to see whether one message clears it for everyone. Each test has its own lane."""

from __future__ import annotations

import pytest

from attack_support import (
    FAST, RELU, assert_properties, candidate, dedicated_lane, describe, lane_still_judges, not_infra_error,
)
from sandbox_service.evaluation import run_isolated
from sandbox_service.lane import IPC_MIN_BYTES

MODES = ["ipc_garbage", "set_not_a_number", "trial_out_of_range", "handover_not_an_object",
         "outputs_done_without_fields"]


@pytest.mark.parametrize("mode", MODES)
def test_malformed_message_fails_only_its_sender_and_changes_nothing_shared(mode):
    with dedicated_lane() as lane:
        lane.ipc_min_bytes = IPC_MIN_BYTES  # as on a CUDA lane
        result = run_isolated(RELU, candidate("sends_malformed_message", MODE=mode),
                              FAST, lane)
        switched = (None if lane.ipc_min_bytes == IPC_MIN_BYTES else
                    f"one message from the candidate switched the lane's hand-over: ipc_min_bytes is now "
                    f"{lane.ipc_min_bytes!r} (was {IPC_MIN_BYTES}); verdict {describe(result)}")
        later = lane_still_judges(lane)
    assert_properties(not_infra_error(result), switched, later)
