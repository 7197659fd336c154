"""The executor design's correctness trials run on seeds new to every evaluation: nothing an earlier
evaluation left behind (in an executor's memory or elsewhere) answers a later one's inputs."""

from __future__ import annotations

import collections

from sandbox_cases import CORRECT, FAST, INCORRECT, REFERENCE
from sandbox_service import evaluation
from sandbox_service.evaluation import run_isolated
from sandbox_service.results import Status


def _judge_counts(lane) -> collections.Counter:
    total = collections.Counter()
    for judge in lane.judges:
        with judge.lock:
            total.update(judge.request({"op": "stats"}, 30)["counts"])
    return total


def test_every_evaluation_draws_its_own_trial_seeds_and_the_judge_answers_them(cpu_lane, monkeypatch):
    drawn: list[list[list[int]]] = []
    monkeypatch.setattr(evaluation, "fresh_trial_seeds", _recorder(drawn))
    before = _judge_counts(cpu_lane)
    first = run_isolated(REFERENCE, CORRECT, FAST, cpu_lane)
    second = run_isolated(REFERENCE, CORRECT, FAST, cpu_lane)
    wrong = run_isolated(REFERENCE, INCORRECT, FAST, cpu_lane)
    after = _judge_counts(cpu_lane)
    # The executor made its inputs from the same seeds the judge answered: a correct kernel passes, a wrong
    # one does not.
    assert (first.status, second.status, wrong.status) == (Status.OK, Status.OK, Status.INCORRECT), \
        (first.error, second.error, wrong.error)
    assert len(drawn) == 3
    seeds = [{seed for row in grid for seed in row} for grid in drawn]
    assert not seeds[0] & seeds[1] and not seeds[1] & seeds[2]
    trials = sum(len(row) for row in drawn[0])
    assert after["fresh_seed"] - before["fresh_seed"] == 3 * trials  # every trial's expected outputs made anew


def _recorder(drawn: list):
    real = evaluation.fresh_trial_seeds

    def recording(sets: int, trials: int) -> list[list[int]]:
        drawn.append(real(sets, trials))
        return drawn[-1]

    return recording
