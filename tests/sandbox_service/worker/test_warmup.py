"""A candidate process runs the harness's own device operations once before its job arrives."""

from __future__ import annotations

import torch

from sandbox_service.verifier import runtime
from sandbox_service.worker import harness, warmup


def test_the_warm_up_runs_input_generation_fingerprints_and_the_runtime_checks(monkeypatch):
    called = []
    for module, name in ((harness, "fingerprint_parts"), (harness, "finish_fingerprints"), (harness, "clone")):
        original = getattr(module, name)
        monkeypatch.setattr(module, name, lambda *a, _o=original, _n=name, **k: called.append(_n) or _o(*a, **k))
    original_check = runtime.RuntimeMonitor.check_after_forward
    monkeypatch.setattr(runtime.RuntimeMonitor, "check_after_forward",
                        lambda self, *a: called.append("check_after_forward") or original_check(self, *a))
    warmup.load_harness_kernels(torch.device("cpu"))
    assert {"fingerprint_parts", "finish_fingerprints", "clone", "check_after_forward"} <= set(called)



def _handshake(orders: list[dict], monkeypatch) -> tuple[bool | None, list[dict], list[str]]:
    """Run child_main._warm_up against a server that sends `orders`; what it returned, sent and ran."""
    import os
    import threading

    from sandbox_service.worker import child_main, protocol

    ran = []
    monkeypatch.setattr(warmup, "load_harness_kernels", lambda device: ran.append(str(device)))
    ctrl_read, ctrl_write = os.pipe()
    report_read, report_write = os.pipe()
    outcome: dict = {}

    def child():
        try:
            outcome["returned"] = child_main._warm_up(protocol.Receiver(ctrl_read), report_write, torch.device("cpu"))
        except protocol.ProtocolError as exc:
            outcome["error"] = exc
        finally:
            os.close(report_write)

    thread = threading.Thread(target=child)
    thread.start()
    reports = protocol.Receiver(report_read)
    sent = [reports.receive(timeout=10)]
    assert not ran  # nothing launched before the server answers `context`
    for order in orders:
        protocol.send(ctrl_write, order)
    os.close(ctrl_write)
    thread.join(10)
    return outcome.get("returned"), sent, ran


def test_a_candidate_says_context_and_launches_nothing_until_the_server_says_warm(monkeypatch):
    returned, sent, ran = _handshake([{"type": "warm"}], monkeypatch)
    assert sent[0]["type"] == "context" and returned is True and ran == ["cpu"]


def test_a_candidate_whose_server_hangs_up_before_warm_exits_quietly(monkeypatch):
    returned, _, ran = _handshake([], monkeypatch)
    assert returned is False and ran == []
