"""The full pipeline on the attack candidates that the other attack tests run through `run_isolated`: what the
static layer already stops before any process runs (each is `cheat` with static violations). Nothing runs in a
process here (a rejected candidate never reaches the lane), so the session's shared CPU lane is safe to use.

This documents where the defence holds today; the `run_isolated` tests show what happens behind it."""

from __future__ import annotations

import pytest

from attack_support import FAST, RELU, candidate, describe
from sandbox_service.evaluation import evaluate
from sandbox_service.results import Status

SCREENED = [
    ("forges_report_via_emit", {}),
    ("forges_frames_with_nonce_from_gc", {}),
    ("blinds_runtime_monitor", {}),
    ("grid_callable_computes_with_torch", {}),
    ("helper_process_computes_through_shared_memory", {}),
    ("session_daemon", {}),
    ("daemon_rewrites_later_candidates", {}),
    ("plants_module_on_import_path", {}),
    ("injects_judge_requests", {}),
    ("poisons_sibling_verdict_pipes", {}),
    ("signals_lane_processes", {}),
    ("sends_malformed_message", {"MODE": "ipc_garbage"}),
]


@pytest.mark.parametrize("name, placeholders", SCREENED, ids=[name for name, _ in SCREENED])
def test_static_layer_rejects_the_isolated_attacks_before_they_run(cpu_lane, tmp_path, name, placeholders):
    result = evaluate(RELU, candidate(name, **placeholders), FAST, cpu_lane)
    assert result.status == Status.CHEAT, describe(result)
    assert result.violations and all(v.layer == "static" for v in result.violations), describe(result)
    assert not any(layer.name == "runtime" for layer in result.layers), "it ran: the static layer should stop it"
