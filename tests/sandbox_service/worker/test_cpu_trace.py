"""The server's own account of where an executor's CPU goes: read from /proc as each message arrives, summed by
the message that ends the stage, and nothing the child reports."""

from __future__ import annotations

import os
import sys
import time

import pytest

from sandbox_service.worker import conversation
from sandbox_service.worker.cpu_trace import CpuTrace, cpu_seconds

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")


def _burn(seconds: float) -> None:
    until = time.process_time() + seconds
    while time.process_time() < until:
        pass


def test_each_stage_is_named_after_the_message_that_ends_it_and_repeats_add_up():
    trace = CpuTrace(os.getpid(), since=cpu_seconds(os.getpid()) - 0.05)
    _burn(0.1)
    trace.mark("trial_outputs")
    _burn(0.1)
    trace.mark("trial_outputs")
    trace.mark("outputs_done")
    assert trace.stages["between jobs"] == pytest.approx(0.05, abs=0.02)
    assert trace.stages["trial_outputs"] == pytest.approx(0.2, abs=0.05)
    assert trace.stages["outputs_done"] < 0.03
    assert trace.summary().startswith("between jobs 50, trial_outputs ")


def test_a_process_that_is_gone_leaves_the_trace_as_it_was():
    trace = CpuTrace(2 ** 22 + 4321)
    trace.mark("inputs_ready")
    assert trace.last is None and trace.stages == {} and trace.summary() == ""


class _Child:
    pid = os.getpid()
    _closed = False

    def __init__(self, kinds: list[str]):
        self.kinds = kinds

    def receive(self, timeout=None) -> dict:
        if not self.kinds:
            raise OSError("closed")
        return {"type": self.kinds.pop(0), "nonce": "n"}


class _Deadline:
    def remaining(self) -> float:
        return 1.0


def test_the_message_stream_marks_each_message_it_reads():
    trace = CpuTrace(os.getpid())
    stream = conversation.MessageStream(_Child(["inputs_ready", "outputs_done"]), "n", trace=trace)
    assert [stream.next(_Deadline(), None)["type"] for _ in range(3)] == ["inputs_ready", "outputs_done", "exited"]
    assert set(trace.stages) == {"inputs_ready", "outputs_done"}
    stream.close()
