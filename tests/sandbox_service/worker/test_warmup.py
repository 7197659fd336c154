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

