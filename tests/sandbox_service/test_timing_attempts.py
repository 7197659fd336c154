"""The outside floor with the server's coarse clock: a batch the clock saw as slow is timed again and the floor
takes the lower clock, while the executor's figure stays the first batch's; a forged executor figure meets the
floor on every batch."""

from __future__ import annotations

import pytest

from sandbox_service.evaluation import OUTSIDE_FLOOR
from timing_support import time_with


def _evaluate(executor_us: float, outside_us: list[float]):
    return time_with([(executor_us, outside) for outside in outside_us])


def test_a_quiet_batch_is_timed_once_and_the_executor_s_figure_used():
    result, batches = _evaluate(200.0, [210.0])
    assert batches == 1 and result.candidate_time_us == pytest.approx(200.0)


def test_a_batch_the_clock_saw_as_slow_is_timed_again_and_the_lower_clock_sets_the_floor():
    result, batches = _evaluate(200.0, [700.0, 220.0])  # an honest kernel, one noisy batch
    assert batches == 2 and result.candidate_time_us == pytest.approx(200.0)
    assert result.speedup == pytest.approx(2.0)


def test_a_forged_figure_meets_the_floor_on_every_batch():
    result, batches = _evaluate(1.0, [200.0, 180.0])  # the executor claims 1 us; the clock sees 180-200 us
    assert batches == 2 and result.candidate_time_us == pytest.approx(OUTSIDE_FLOOR * 180.0, rel=0.01)


def test_no_more_than_two_batches():
    result, batches = _evaluate(1.0, [200.0, 200.0, 200.0])
    assert batches == 2


def test_the_empty_batch_is_measured_twice_and_the_quicker_one_sets_the_floor():
    """The first empty batch of an executor pays first-time costs (the flush buffer's allocation, the lead's
    calibration): taken alone, it read longer than a timed batch, the floor read zero and a forged figure passed."""
    result, batches = time_with([(1.0, 200.0), (1.0, 200.0)], empty_extra_us=[400.0, 0.0])
    assert result.candidate_time_us == pytest.approx(OUTSIDE_FLOOR * 200.0, rel=0.01)
