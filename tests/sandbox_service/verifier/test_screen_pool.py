"""The screen pool (sandbox_service/verifier/screen_pool.py): the format and static layers in trusted worker
processes give exactly the verdicts the in-thread screens gave; several threads share it; a worker killed, hung
or starved mid-request is replaced and the request answered (or charged, or a clear ScreenFailure); the
workers are undumpable, import from the package root only, and none outlives `close()`."""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import threading
import time
from pathlib import Path

import pytest
import yaml

from sandbox_cases import CHEAT, CORRECT, FAST, INCORRECT, REFERENCE
from sandbox_service.options import CandidateFormat, EvalOptions, Policy
from sandbox_service.results import Status
from sandbox_service.verifier.format import check_format
from sandbox_service.verifier.screen_pool import ScreenFailure, ScreenPool
from sandbox_service.verifier.static_rules import check_static
from sandbox_service.worker.process import PACKAGE_ROOT

HERE = Path(__file__).resolve().parent
CORPUS = HERE.parent / "corpus"
MANIFEST = yaml.safe_load((CORPUS / "manifest.yaml").read_text())["candidates"]
STRICT, RELAXED = EvalOptions(), EvalOptions(policy=Policy.RELAXED)

FORMAT_CASES = [
    ("", STRICT),
    ("   \n", STRICT),
    ("I would write a kernel here, but I won't.", EvalOptions(candidate_format=CandidateFormat.COMPLETION)),
    ("<think>plan</think>\n```python\n```\n", STRICT),
    ("<think>plan</think>\n```python\n" + CORRECT + "\n```\nDone.", STRICT),
    ("<think>plan</think>\n```python\n" + CHEAT + "\n```\n", STRICT),
    ("def forward(:\n", STRICT),
    ("x = " + "(" * 5000 + "1" + ")" * 5000, STRICT),
    ("import torch\nclass Model: pass\n", STRICT),
    (CORRECT, EvalOptions(max_source_bytes=100)),
    (CORRECT + "\n# ünïcödé \ud800 comment\n", STRICT),
    ("é" * 200, EvalOptions(max_source_bytes=300)),
]


def _cases() -> list[tuple[str, str, EvalOptions]]:
    cases = [(source, REFERENCE, options) for source, options in FORMAT_CASES]
    cases += [(source, REFERENCE, options) for source in (CORRECT, INCORRECT, CHEAT) for options in (STRICT, RELAXED)]
    for entry in MANIFEST:
        source, reference = (CORPUS / entry["file"]).read_text(), (CORPUS / entry["problem"]).read_text()
        cases += [(source, reference, STRICT), (source, reference, RELAXED)]
    return cases


CASES = _cases()


def in_thread(candidate: str, reference: str, options: EvalOptions) -> tuple:
    """What the server's threads computed before the pool: the code, the format and the static violations."""
    fmt = check_format(candidate, options.candidate_format, options.max_source_bytes)
    if fmt.violations:
        return None, fmt.violations, None
    return fmt.code, [], check_static(fmt.code, options.policy, reference)


def pooled(pool: ScreenPool, candidate: str, reference: str, options: EvalOptions) -> tuple:
    screened = pool.screen(candidate, reference, options)
    return screened.code, screened.format_violations, screened.static_violations


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def screen_children() -> list[int]:
    """This process's children named trl-screen (screen workers of any pool in this test process)."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        name, rest = stat.split("(", 1)[1].rsplit(")", 1)
        if name == "trl-screen" and int(rest.split()[1]) == os.getpid() and rest.split()[0] != "Z":
            found.append(int(pid))
    return found


def marked_pool(workers: int = 2, timeout_s: float = 3.0) -> ScreenPool:
    return ScreenPool(workers=workers, timeout_s=timeout_s, job="screen_jobs:marked", import_path=[HERE])


@pytest.fixture(scope="module")
def pool():
    pool = ScreenPool()
    yield pool
    pool.close()


@pytest.fixture(scope="module")
def expected():
    return [in_thread(*case) for case in CASES]


def test_the_pool_gives_the_in_thread_verdicts(pool, expected):
    assert len(CASES) > 200
    for case, want in zip(CASES, expected):
        assert pooled(pool, *case) == want, case[0][:300]
    rules = {v.rule for _, fmt, static in expected for v in fmt + (static or [])}
    assert {"empty-code", "no-code-block", "syntax-error", "no-model-new", "too-large", "torch-compute-call"} <= rules


def test_concurrent_requests_from_several_threads(pool, expected):
    picks = list(range(0, len(CASES), 7))
    failures, answered = [], []

    def work(offset: int) -> None:
        for index in picks[offset:] + picks[:offset]:
            got = pooled(pool, *CASES[index])
            answered.append(index)
            if got != expected[index]:
                failures.append(index)

    threads = [threading.Thread(target=work, args=(3 * i,)) for i in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not failures
    assert len(answered) == 6 * len(picks)
    assert len(pool.pids()) == 2  # both workers served, neither was lost
    assert pool.restarts == 0


def test_the_layers_durations_are_reported(pool):
    screened = pool.screen(CORRECT, REFERENCE, STRICT)
    assert screened.format_s > 0 and screened.static_s > 0
    rejected = pool.screen("not code", REFERENCE, STRICT)
    assert rejected.static_violations is None and rejected.static_s == 0.0


def test_a_request_past_its_timeout_is_charged_and_the_pool_keeps_serving():
    pool = marked_pool(timeout_s=2.0)
    try:
        before = pool.screen(CORRECT, REFERENCE, STRICT)
        spinning = set(pool.pids())
        started = time.monotonic()
        screened = pool.screen(CORRECT + "\n# SPIN_STATIC\n", REFERENCE, STRICT)
        assert time.monotonic() - started < 10
        # past the format layer, the static layer's verdict: the analysis did not finish (cheat)
        assert screened.format_violations == [] and screened.code == before.code + "\n# SPIN_STATIC\n"
        assert [(v.layer, v.rule, v.line) for v in screened.static_violations] == [("static", "unanalysable", 0)]
        assert "did not finish (no answer within 2 s)" in screened.static_violations[0].message
        # before the format layer answered: the text does not parse in time (format_error)
        screened = pool.screen(CORRECT + "\n# SPIN_FORMAT\n", REFERENCE, STRICT)
        assert screened.code is None and screened.static_violations is None
        assert [(v.layer, v.rule) for v in screened.format_violations] == [("format", "syntax-error")]
        message = screened.format_violations[0].message
        assert message == "does not parse: the format check did not finish (no answer within 2 s)"
        assert pool.timeouts == 2 and pool.restarts == 2
        assert not any(alive(pid) for pid in spinning), "the spinning worker was not killed"
        assert pooled(pool, CHEAT, REFERENCE, STRICT) == in_thread(CHEAT, REFERENCE, STRICT)
        assert len(pool.pids()) >= 1
    finally:
        pool.close()


def test_a_starved_worker_is_the_machine_s_fault_not_the_candidate_s():
    """A worker that got (almost) no CPU before the timeout was not kept busy by the text: no verdict."""
    pool = marked_pool(timeout_s=1.0)
    try:
        with pytest.raises(ScreenFailure, match="overloaded"):
            pool.screen(CORRECT + "\n# SLEEP_LONG\n", REFERENCE, STRICT)
        assert pooled(pool, CORRECT, REFERENCE, STRICT) == in_thread(CORRECT, REFERENCE, STRICT)
    finally:
        pool.close()


def test_a_worker_killed_mid_request_is_replaced_and_the_request_answered():
    pool = marked_pool(workers=1, timeout_s=10.0)
    try:
        pool.screen(CORRECT, REFERENCE, STRICT)  # the worker is up
        (victim,) = pool.pids()
        answers = []
        asker = threading.Thread(target=lambda: answers.append(pool.screen(CHEAT + "\n# SLEEP_SHORT\n", REFERENCE,
                                                                           STRICT)))
        asker.start()
        time.sleep(0.5)  # it is sleeping on the request
        os.kill(victim, signal.SIGKILL)
        asker.join(timeout=30)
        assert answers, "no answer"
        want = in_thread(CHEAT + "\n# SLEEP_SHORT\n", REFERENCE, STRICT)
        assert (answers[0].code, answers[0].format_violations, answers[0].static_violations) == want
        assert pool.restarts == 1 and victim not in pool.pids() and not alive(victim)
    finally:
        pool.close()


def test_a_text_that_kills_two_workers_is_charged():
    pool = marked_pool(workers=1)
    try:
        screened = pool.screen(CORRECT + "\n# DIE_STATIC\n", REFERENCE, STRICT)
        assert [v.rule for v in screened.static_violations] == ["unanalysable"]
        assert "died twice" in screened.static_violations[0].message
        assert pool.restarts == 2
        assert pooled(pool, CORRECT, REFERENCE, STRICT) == in_thread(CORRECT, REFERENCE, STRICT)
    finally:
        pool.close()


def test_an_exception_in_a_layer_is_a_screen_failure_and_the_worker_stays():
    pool = marked_pool(workers=1)
    try:
        pool.screen(CORRECT, REFERENCE, STRICT)
        before = pool.pids()
        with pytest.raises(ScreenFailure, match="KeyError"):
            pool.screen(CORRECT + "\n# RAISE\n", REFERENCE, STRICT)
        assert pool.pids() == before and pool.restarts == 0
        assert pooled(pool, CORRECT, REFERENCE, STRICT) == in_thread(CORRECT, REFERENCE, STRICT)
    finally:
        pool.close()


def test_workers_import_from_the_package_root_only_and_are_undumpable():
    pool = marked_pool(workers=1)
    try:
        where = json.loads(pool.screen("REPORT_PATH", REFERENCE, STRICT).code)
        assert where["cwd"] == "/"
        assert where["path"][0] == str(PACKAGE_ROOT)
        assert all(os.path.isabs(p) and p != "/" for p in where["path"]), where["path"]
        assert where["dumpable"] is False  # prctl(PR_GET_DUMPABLE) in the worker itself
    finally:
        pool.close()


def test_no_worker_outlives_close():
    pool = ScreenPool(workers=3).start()
    threads = [threading.Thread(target=pool.screen, args=(CORRECT, REFERENCE, STRICT)) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    pids = pool.pids()
    assert len(pids) == 3 and set(pids) <= set(screen_children())
    pool.close()
    assert not any(alive(pid) for pid in pids)
    assert not set(pids) & set(screen_children())
    with pytest.raises(ScreenFailure, match="closed"):
        pool.screen(CORRECT, REFERENCE, STRICT)


def test_close_ends_a_busy_worker_and_fails_its_request():
    pool = marked_pool(workers=1, timeout_s=60)
    pool.screen(CORRECT, REFERENCE, STRICT)
    (pid,) = pool.pids()
    errors = []

    def ask() -> None:
        try:
            pool.screen(CORRECT + "\n# SLEEP_LONG\n", REFERENCE, STRICT)
        except ScreenFailure as exc:
            errors.append(str(exc))

    asker = threading.Thread(target=ask)
    asker.start()
    time.sleep(0.5)
    started = time.monotonic()
    pool.close()
    asker.join(timeout=10)
    assert time.monotonic() - started < 10
    assert errors and "closed" in errors[0]
    assert not alive(pid) and pool.pids() == []


def test_an_evaluation_screens_in_its_lane_s_workers(cpu_lane):
    from sandbox_service.evaluation import evaluate

    result = evaluate(REFERENCE, CHEAT, FAST, cpu_lane)
    assert result.status == Status.CHEAT and not result.valid
    layers = [(layer.name, layer.outcome.value) for layer in result.layers]
    assert layers == [("format", "passed"), ("static", "failed")]
    assert cpu_lane.screens.pids() and os.getpid() not in cpu_lane.screens.pids()
    result = evaluate(REFERENCE, "no code here", FAST, cpu_lane)
    assert result.status == Status.FORMAT_ERROR
    assert [(layer.name, layer.outcome.value) for layer in result.layers] == [("format", "failed")]


def test_a_screen_failure_is_infra_error(cpu_lane, monkeypatch):
    from sandbox_service.evaluation import evaluate

    def fail(*args, **kwargs):
        raise ScreenFailure("no screen worker would take the request")

    monkeypatch.setattr(cpu_lane.screens, "screen", fail)
    result = evaluate(REFERENCE, CORRECT, FAST, cpu_lane)
    assert result.status == Status.INFRA_ERROR and "the source screens failed" in result.error


def test_evaluate_local_leaves_no_screen_worker_behind():
    from sandbox_service.evaluation import evaluate_local

    before = set(screen_children())
    result = evaluate_local(REFERENCE, CHEAT, dataclasses.replace(FAST, time=False), backend="interpreter")
    assert result.status == Status.CHEAT
    assert set(screen_children()) <= before


def test_a_server_shares_one_pool_among_its_lanes_and_closes_it(tmp_path):
    from sandbox_service.scheduler import Scheduler, SchedulerConfig

    scheduler = Scheduler(SchedulerConfig(backend="interpreter", workers_per_lane=1, warm_per_lane=0,
                                          work_root=tmp_path))
    try:
        assert all(lane.screens is scheduler.screens for lane in scheduler.lanes)
        assert pooled(scheduler.screens, CHEAT, REFERENCE, STRICT) == in_thread(CHEAT, REFERENCE, STRICT)
        pids = scheduler.screens.pids()
        assert len(pids) == 2  # started with the server
        scheduler.lanes[0].close()  # a lane leaves the server's pool alone
        assert scheduler.screens.pids() == pids
    finally:
        scheduler.shutdown(grace_s=1)
    assert not any(alive(pid) for pid in pids)
