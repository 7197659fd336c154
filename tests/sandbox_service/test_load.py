"""An overloaded machine makes evaluations wait, never fail: many more evaluations than cores, all right."""

from __future__ import annotations

from sandbox_cases import CHEAT, CORRECT, INCORRECT, REFERENCE, fixture_candidate
from sandbox_service.client import RetryPolicy, SandboxClient
from sandbox_service.options import EvalOptions
from sandbox_service.results import Status
from sandbox_service.server import SandboxServer, ServerConfig


def test_oversubscribed_server_gives_every_evaluation_its_right_verdict():
    # 6 workers on a 2-core CI machine, a queue of 4 and 40 evaluations sent at once: the queue fills
    # (RESOURCE_EXHAUSTED), the client waits and retries, and no evaluation times out or fails.
    server = SandboxServer(ServerConfig(port=0, backend="interpreter", workers=6, queue_capacity=4, warm=2,
                                        grace_s=5)).start()
    cases = [(CORRECT, Status.OK), (INCORRECT, Status.INCORRECT), (CHEAT, Status.CHEAT),
             (fixture_candidate("runtime_error"), Status.RUNTIME_ERROR)] * 10
    try:
        options = EvalOptions(trials=2, timeout_s=120, memory_limit_mb=4096)
        with SandboxClient([server.address], default_options=options, retry=RetryPolicy(attempts=3),
                           timeout_s=1200) as client:
            results = dict(client.evaluate_many([(REFERENCE, c) for c, _ in cases], max_concurrency=len(cases)))
    finally:
        server.stop(grace_s=5)
    got = [results[i].status for i in range(len(cases))]
    wrong = [(i, g, results[i].error[:200]) for i, ((_, want), g) in enumerate(zip(cases, got)) if g != want]
    assert not wrong
