"""Red team 14: timing without draining the judges (5e153c7: `Lane.gpu_alone` takes the evaluation's judge, then
the gate, then freezes every other process of the lane, the other judges mid-turn included; `TimingGate` no longer
waits for judges' turns; `Freezer` registers judges with an owner and thaws only what it froze; `Child.freeze`
nests; `ServiceProcess.request` gets back the time the lane spent frozen). Each FINDING test asserts the secure
behaviour, so it FAILS while its flaw is there. Everything runs on the CPU (interpreter lanes); GPU-only effects
are argued.

- FINDING own-hold-stops-own-deadline (DoS of a whole lane): `Deadline` adds back the lane's frozen clock
  (`Freezer.frozen_seconds`), which runs during every hold, the evaluation's own included. While an evaluation is
  timed its own deadline therefore stands still: a timed process that never answers holds the GPU gate, and every
  other process of the lane (now every other judge too) stays frozen, until the caller gives up (the client's
  default RPC limit is 900 s), and then the attacker's own verdict is `infra_error` ("cancelled"), which the trainer
  masks. Triggers: in the in-process design the candidate's process times itself and its code can sleep there
  (test below); in the executor design the executor has no CPU limit ("the server's deadlines bound it") and a
  candidate kernel that spins only once the trials are over (a launch counter in its own buffer) holds it the
  same way (GPU, argued); a validated reference that hangs when timed likewise.
  Fix: a deadline is kept for its own process (`Deadline(..., of=child)`; `Freezer.frozen_seconds(of)` leaves out
  the holds that kept `of` running); the server's own work inside the hold (the empty batches, the reference's
  timing) is added back explicitly, as the trusted builds already were. Tests: the in-process attack end to end
  (the attacker and an honest neighbour were both `infra_error` after 38 s; now `timeout` and `ok`), and the fix's
  two sides on the freezer's clock and `_timed_attempt` (these use `of=`, so on the old code they fail on it).

- FINDING kept-judge-never-times-out (new in 5e153c7): `ServiceProcess._receive` extends a request by the lane's
  frozen clock, which also runs while the request's own judge is the one the hold keeps running. The timed
  evaluation's reference timing (REFERENCE_TIMING_TIMEOUT_S) and re-preparation inside `gpu_alone` had no time
  limit any more: a reference that hangs when timed (references may hang: docs/security.md) held the lane with
  every other judge frozen for good, where before the judge was killed after 600 s. Also the timing fixed for the
  previous finding would not bound it (the judge's request runs inside the hold, under no deadline).
  Fix: the judges' clock is `frozen_seconds(of=the judge)` (ServiceProcess passes itself to `paused`).

- FINDING frozen-judges-leave-gpu-work-in-the-hold (GPU, argued; strict xfail, not fixed): freezing stops launches,
  not kernels (red team 11; red team 12 is why housekeeping is still waited for). A judge frozen mid-turn has queued
  the reference's forward on fresh seeds (compare), a whole preparation, or an IPC read, and that work runs through
  the hold. Before 5e153c7 a hold waited for judges' turns in flight. Now the timed batch and, worse, the
  reference's timing (measured twice in one hold the first time, kept per lane and task for every later candidate
  until a 10% remeasure finds it lower) can read long while another judge of the same task (4 per task now: an RL
  group's siblings are compared on them at the same time) works: inflated reference times give the whole group
  inflated speedups. Suggested: a hold that will time the reference (decided before it) waits for the judges'
  turns in flight, as the old gate did (rare: first timings and REFERENCE_REFRESH), or the judges synchronise
  (`torch.cuda.synchronize`) before any reply and a hold waits for turns in flight only when it measures a figure
  kept for others.

Ideas that failed (regression tests below pin the properties):
- deadlocks between the new lock order (judge lock, then the gate) and the turns (gate's shared side, which holds
  nothing once entered, then the judge lock): no thread waits for the gate while it holds a judge lock, a hold
  needs no other judge, the builder is never frozen, trims never wait for a lock; timings and turns on two judges,
  hammered together, all finish with the gate, the freezer and every process's freeze count back at rest.
- nesting: `_compare` freezes and thaws in try/finally; a hold thaws exactly what it froze (`_stopped`), a process
  registered during a hold is frozen and thawed once, one closed during a hold is thawed without a signal and
  without breaking the others' thaw; the timed evaluation's own judge restarted during its hold is registered kept.
- a candidate timing out mid-hold: `_Finish` leaves `gpu_alone` through its context managers (freezer, gate, judge
  lock, in that order); the executor is discarded afterwards (a timed-out kernel may run on for the moment between
  the hold's end and the kill: red team 11's open item, not new).
- a frozen judge's request: waits for the hold, is not timed out for it and the judge is not restarted
  (test_lane.py); a judge restarted during another evaluation's hold is frozen until its end (wait_ready's 300 s is
  wall time, so only a hold that long, bounded now by the timed evaluation's deadline, could fail its start).
"""

from __future__ import annotations

import os
import random
import signal
import tempfile
import threading
import time
from pathlib import Path

import pytest

from attack_support import HONEST, RELU, attempted, candidate, dedicated_lane, describe
from sandbox_service import evaluation
from sandbox_service.evaluation import run_isolated
from sandbox_service.lane import IN_PROCESS_DESIGN, TRACER, Lane
from sandbox_service.options import EvalOptions
from sandbox_service.results import Status
from sandbox_service.worker.service import ServiceFailure
from timing_support import stand_in_judge

ATTACK_TIMEOUT_S = 8.0
# What the callers wait before they give up in these tests (the real client waits 900 s).
GIVE_UP_S = ATTACK_TIMEOUT_S + 30.0


def _state(pid: int) -> str:
    try:
        return open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return "gone"


def _eventually_stopped(pid: int, expected: bool, wait_s: float = 5.0) -> bool:
    deadline = time.monotonic() + wait_s
    while True:  # a signal takes effect asynchronously
        stopped = _state(pid) in ("T", "t")
        if stopped == expected or time.monotonic() > deadline:
            return stopped
        time.sleep(0.01)


@pytest.fixture(scope="module")
def two_judges():
    """An interpreter lane of its own with two judges (the CPU default is one)."""
    with tempfile.TemporaryDirectory(prefix="tritonrl-redteam14-") as root:
        lane = Lane.create("interpreter", None, warm=1, work_root=Path(root), judges=2)
        try:
            for judge in lane.judges:
                with judge.lock:
                    judge.request({"op": "stats"}, 120)
            yield lane
        finally:
            lane.close()


# FINDING own-hold-stops-own-deadline
def test_a_candidate_that_never_answers_its_timing_times_out_and_the_lane_goes_on(monkeypatch):
    """The in-process design: a correct candidate whose process sleeps once told to time itself. Its evaluation must
    end `timeout` within its own time limit, and an honest evaluation started on the lane meanwhile must finish
    `ok` (it is frozen, and its judge's turns kept out, only while the attacker holds the GPU)."""
    attack = candidate("redteam14_sleeps_through_its_timing")
    verdict = evaluation._Evaluation._verdict

    def timed_on_the_cpu(self, outputs, prepared, started):
        # The interpreter lane skips timing; the attacker's evaluation is timed as on a GPU.
        decided = verdict(self, outputs, prepared, started)
        return decided or "_stop_for_good" in self.sources["candidate.py"]

    monkeypatch.setattr(evaluation._Evaluation, "_verdict", timed_on_the_cpu)
    options = EvalOptions(trials=2, timeout_s=ATTACK_TIMEOUT_S, memory_limit_mb=4096)
    results, cancels = {}, {"attack": threading.Event(), "honest": threading.Event()}

    def run(name: str, code: str) -> None:
        started = time.monotonic()
        results[name] = (run_isolated(RELU, code, options, lane, cancel=cancels[name]), time.monotonic() - started)

    with dedicated_lane(warm=2, design=IN_PROCESS_DESIGN) as lane:
        attacker = threading.Thread(target=run, args=("attack", attack), daemon=True)
        attacker.start()
        holding = time.monotonic() + GIVE_UP_S
        while not lane.gate._writer and attacker.is_alive() and time.monotonic() < holding:
            time.sleep(0.01)
        honest = threading.Thread(target=run, args=("honest", HONEST), daemon=True)
        honest.start()
        give_up = time.monotonic() + GIVE_UP_S  # both callers give up then, as the client does after its RPC limit
        for thread in (attacker, honest):
            thread.join(max(0.0, give_up - time.monotonic()))
        for name, thread in (("attack", attacker), ("honest", honest)):
            if thread.is_alive():
                cancels[name].set()
        for thread in (attacker, honest):
            thread.join(30)
        gate_at_rest = not lane.gate._writer and not lane.gate._writers_waiting
    attack_result, attack_s = results["attack"]
    honest_result, honest_s = results["honest"]
    assert "sleep-through-the-timing-hold" in attempted(attack_result), describe(attack_result)
    problems = []
    if cancels["attack"].is_set() or attack_result.status != Status.TIMEOUT:
        problems.append(f"the attacker held the GPU until its caller gave up ({attack_s:.0f} s, its limit "
                        f"{ATTACK_TIMEOUT_S:.0f} s): {describe(attack_result)}")
    if cancels["honest"].is_set() or honest_result.status != Status.OK:
        problems.append(f"an honest evaluation beside it: {describe(honest_result)} after {honest_s:.0f} s")
    if not gate_at_rest:
        problems.append("the gate was still held or waited for after both evaluations")
    assert not problems, "\n".join(problems)


# FINDING kept-judge-never-times-out
def test_the_timed_evaluations_own_judge_is_still_timed_out_during_the_hold(two_judges):
    """The judge the hold keeps running is asked (as for the reference's timing) and never answers (a SIGSTOP
    stands in for a reference that hangs when timed): the request must fail within its own limit, not wait for
    the hold to end (which here only the test ends, after 8 s, by letting the judge go on)."""
    lane = two_judges
    judge = lane.judges[0]
    pid = judge._child.pid
    outcome = {}

    def timed() -> None:
        with lane.gpu_alone(keep=None, judge=judge):
            os.kill(pid, signal.SIGSTOP)
            started = time.monotonic()
            try:
                outcome["answer"] = judge.request({"op": "stats"}, 0.5)
            except ServiceFailure as exc:
                outcome["failure"] = exc
            outcome["seconds"] = time.monotonic() - started

    holder = threading.Thread(target=timed, daemon=True)
    holder.start()
    holder.join(8)
    if holder.is_alive():
        os.kill(pid, signal.SIGCONT)  # the hung reference finishes after all
        holder.join(30)
    assert "failure" in outcome and outcome["failure"].timed_out, (
        f"the kept judge's request with a 0.5 s limit: {outcome}")
    assert outcome["seconds"] < 5
    with judge.lock:  # restarted, and serving again
        assert judge.request({"op": "stats"}, 120)["type"] == "stats"


def test_a_frozen_judges_request_still_waits_for_the_hold(two_judges):
    """The other side of the fix: the judge the hold froze (not the one it keeps) is not timed out for the hold."""
    lane = two_judges
    kept, frozen = lane.judges
    generation, answers = frozen.generation, []

    def ask() -> None:
        with frozen.lock:
            answers.append(frozen.request({"op": "stats"}, 0.5))

    with lane.gpu_alone(keep=None, judge=kept):
        assert _eventually_stopped(frozen._child.pid, True)
        assert not _eventually_stopped(kept._child.pid, False, 0.2)
        asking = threading.Thread(target=ask, daemon=True)
        asking.start()
        time.sleep(1.5)
    asking.join(10)
    assert answers and answers[0]["type"] == "stats"
    assert frozen.generation == generation


# FINDING frozen-judges-leave-gpu-work-in-the-hold
def test_a_hold_that_measures_the_reference_does_not_begin_during_another_judges_turn(two_judges):
    lane = two_judges
    timed_judge, other = lane.judges
    turn_ended, entered = [], []
    in_turn = threading.Event()

    def turn() -> None:
        with lane.gate.turn(other.lock):
            in_turn.set()
            time.sleep(1.0)  # the reference's forward on fresh seeds, queued on the GPU
            turn_ended.append(time.monotonic())

    taking = threading.Thread(target=turn, daemon=True)
    taking.start()
    assert in_turn.wait(10)
    with lane.gpu_alone(keep=None, judge=timed_judge, drain=True):  # as _timed_attempt when the reference is due
        entered.append(time.monotonic())
    taking.join(10)
    assert turn_ended and entered[0] >= turn_ended[0], "the hold began while another judge's turn was in flight"


# Properties checked (they hold)
def test_timings_and_turns_on_two_judges_never_deadlock_and_leave_everything_at_rest(two_judges):
    lane = two_judges
    generations = [judge.generation for judge in lane.judges]
    errors, done = [], []

    def timings(seed: int) -> None:
        rng = random.Random(seed)
        try:
            for _ in range(15):
                judge = rng.choice(lane.judges)
                with lane.gpu_alone(keep=None, judge=judge):
                    assert judge.request({"op": "stats"}, 30)["type"] == "stats"
                    time.sleep(rng.random() * 0.005)
            done.append(seed)
        except Exception as exc:  # noqa: BLE001
            errors.append(repr(exc))

    def turns(seed: int) -> None:
        rng = random.Random(seed)
        try:
            for _ in range(25):
                judge = rng.choice(lane.judges)
                with lane.gate.turn(judge.lock):
                    assert judge.request({"op": "stats"}, 30)["type"] == "stats"
                with lane.gate.shared_if_free() as free:
                    if free:
                        lane.judges[0].request_if_idle({"op": "stats"}, 30)
            done.append(seed)
        except Exception as exc:  # noqa: BLE001
            errors.append(repr(exc))

    threads = [threading.Thread(target=timings, args=(i,), daemon=True) for i in range(3)]
    threads += [threading.Thread(target=turns, args=(10 + i,), daemon=True) for i in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert not errors, errors
    assert len(done) == len(threads), "a timing or a turn never finished (deadlock)"
    gate, freezer = lane.gate, lane.freezer
    assert (gate._writer, gate._writers_waiting, gate._housekeeping) == (False, 0, 0)
    assert not freezer._frozen and freezer._stopped == [] and freezer._kept == ()
    for judge in lane.judges:
        assert judge._child._stops == 0 and not _eventually_stopped(judge._child.pid, False, 0.5)
    assert [judge.generation for judge in lane.judges] == generations


def test_a_process_registered_or_closed_during_a_hold_leaves_the_freezer_balanced(two_judges):
    lane = two_judges
    before = lane.candidates.acquire()
    try:
        with lane.gpu_alone(keep=None, judge=lane.judges[0]):
            assert _eventually_stopped(before.pid, True)
            during = lane.spawn(TRACER)  # started while the GPU is held: frozen from its fork
            assert _eventually_stopped(during.pid, True)
            before.close()  # gone during the hold: its thaw must not break the others'
        assert not _eventually_stopped(during.pid, False)
        assert during._stops == 0 and lane.freezer._stopped == []
        assert not _eventually_stopped(lane.judges[1]._child.pid, False)
        during.close()
    finally:
        before.close()


def test_the_kept_judge_restarted_during_its_hold_is_not_frozen(two_judges):
    lane = two_judges
    judge = lane.judges[0]
    with lane.gpu_alone(keep=None, judge=judge):
        judge._child.kill()  # killed under the hold (memory watchdog, a crash): the next request starts it again
        assert judge.request({"op": "stats"}, 120)["type"] == "stats"
        assert not _eventually_stopped(judge._child.pid, False, 0.5)
    assert lane.freezer._stopped == []


# FINDING own-hold-stops-own-deadline: the fix's two sides, on the freezer's clock alone
def test_a_hold_is_frozen_time_for_the_others_and_its_own_time_for_the_process_it_keeps():
    from sandbox_service.worker.conversation import Deadline
    from sandbox_service.worker.pool import Freezer

    freezer, timed, other = Freezer(), object(), object()
    own, others = Deadline(freezer, 0.5, of=timed), Deadline(freezer, 0.5, of=other)
    with freezer.others_frozen(keep=timed):
        time.sleep(0.7)
        assert own.remaining() <= 0, "the timed process's limit stood still during its own hold"
        assert others.remaining() > 0.3
    assert own.remaining() <= 0 and others.remaining() > 0.3


def test_the_server_s_own_work_in_the_hold_is_not_charged_to_the_candidate():
    """The empty batches and the reference's timing run inside the hold, now the candidate's own time: they are
    added back, so an honest candidate is not timed out for the judge's work."""
    import types

    from sandbox_service.evaluation import EXPECTED_TIMING_CHECKS, _Evaluation
    from sandbox_service.results import EvalResult, TimingStats
    from sandbox_service.worker.conversation import Deadline
    from sandbox_service.worker.pool import Freezer

    freezer, executor = Freezer(), type("Executor", (), {"pid": os.getpid()})()  # hashable, as a Child is
    lane = types.SimpleNamespace(empty_batch_s={}, backend="cuda",
                                 gpu_alone=lambda keep=None, judge=None, drain=False: freezer.others_frozen(keep=keep))
    stats = TimingStats(10.0, 10.0, 0.0, 10.0, 10.0, 100)

    def slow_reference(method, fresh_inputs):
        time.sleep(0.6)
        return stats

    options = EvalOptions(timing_runs=100, warmup_runs=3, timeout_s=1.0)
    evaluation = types.SimpleNamespace(
        lane=lane, options=options, child=executor, result=EvalResult(Status.INFRA_ERROR), seen={},
        problem=types.SimpleNamespace(key="task"), timing_checks=EXPECTED_TIMING_CHECKS, remeasure_empty=False,
        judge=stand_in_judge(slow_reference, output_bytes=1))

    def timed_order(order, answer, messages, deadline, job):
        time.sleep(0.3 if order["type"] == "calibrate" else 0.01)  # the empty batches: the server's measurement
        evaluation.seen["timing"] = {"candidate": stats.__dict__}
        return 0.001 if order["type"] == "calibrate" else 0.002

    evaluation._timed_order = timed_order
    evaluation._check_outputs = lambda messages, deadline, checks: iter(())
    deadline = Deadline(freezer, options.timeout_s, of=executor)
    _Evaluation._timed_attempt(evaluation, None, deadline, {})
    assert deadline.remaining() > 0.5, "the judge's and the empty batches' time was charged to the candidate"
