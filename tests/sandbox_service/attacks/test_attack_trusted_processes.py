"""Attack class 4, reaching trusted processes: candidates run as the same user as the judge and the other
candidate processes, so they can open those processes' pipes through /proc/<pid>/fd/N and send them signals.

Properties: the attack candidate does not come back `ok` when it does not do the work, and on the same lane the
next honest evaluations are `ok` and the next wrong ones `incorrect`. The attacks run through `run_isolated`
(the static layer would reject them): the process isolation must hold on its own. Each test has its own lane."""

from __future__ import annotations

import dataclasses

from attack_support import (
    FAST, RELU, assert_properties, attempted, candidate, dedicated_lane, describe, lane_still_judges, not_ok,
)
from sandbox_service.evaluation import run_isolated


def test_requests_injected_into_the_judge_cannot_make_wrong_outputs_pass():
    """The candidate evicts its task from the judge's cache and re-prepares it with an identity reference, through
    the judge's own pipes; its identity kernel and every later one would then match."""
    with dedicated_lane() as lane:
        result = run_isolated(RELU, candidate("injects_judge_requests"), FAST, lane)
        later = lane_still_judges(lane)
    assert attempted(result), f"the attack did not run: {describe(result)}"
    assert_properties(not_ok(result), later)


def test_frames_written_into_idle_siblings_verdict_pipes_cannot_fail_later_honest_kernels():
    """A frame without a nonce waits in an idle sibling's verdict pipe for the next evaluation that gets it."""
    with dedicated_lane() as lane:
        result = run_isolated(RELU, candidate("poisons_sibling_verdict_pipes"), FAST, lane)
        later = lane_still_judges(lane)
    assert attempted(result), f"the attack did not run: {describe(result)}"
    assert_properties(later)


def test_signals_to_idle_siblings_and_the_judge_cannot_fail_later_honest_kernels():
    """SIGSTOP to every idle sibling, SIGKILL to the judge. The later evaluations get 8 s each (a stopped sibling
    would otherwise cost the default 20 s)."""
    with dedicated_lane() as lane:
        result = run_isolated(RELU, candidate("signals_lane_processes"), FAST, lane)
        later = lane_still_judges(lane, options=dataclasses.replace(FAST, timeout_s=8))
    assert attempted(result), f"the attack did not run: {describe(result)}"
    assert_properties(later)
