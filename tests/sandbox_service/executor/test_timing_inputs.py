"""The timed runs' inputs: fresh for every run, the values the judge would make from the same seed, made
just before their run, with no other run's inputs alive."""

import pytest
import torch

from sandbox_service.executor.runner import TimingInputs
from sandbox_service.worker import harness
from timing_support import time_on_the_cpu


class Reference:
    """A reference module's get_inputs: one tensor and a number."""

    calls = 0

    @classmethod
    def get_inputs(cls):
        cls.calls += 1
        return [torch.randn(16, 16), 3]


def made(runs: int = 10) -> TimingInputs:
    Reference.calls = 0
    return TimingInputs(Reference, harness.trial_seeds(5, runs), torch.device("cpu"))


def test_every_run_gets_its_own_seeds_inputs():
    inputs = made()
    seen = [inputs(i)[0] for i in range(10)]
    for i, tensor in enumerate(seen):
        assert torch.equal(tensor, harness.trial_inputs(Reference, inputs.seeds[i], torch.device("cpu"))[0])
    assert len({t.sum().item() for t in seen}) == 10


def test_a_runs_inputs_are_made_when_it_comes_and_the_last_ones_let_go():
    inputs = made()
    inputs(0)
    inputs(0)
    inputs(0)  # asked again while in use: the same set
    assert Reference.calls == 1 and list(inputs.ready) == [0]
    inputs(1)
    assert Reference.calls == 2 and list(inputs.ready) == [1]


def test_the_checked_run_takes_the_judges_seed():
    inputs = made()
    inputs.replace_seed(4, 12345)
    expected = harness.trial_inputs(Reference, 12345, torch.device("cpu"))[0]
    assert torch.equal(inputs(4)[0], expected)


def test_the_empty_batch_samples_its_checked_runs_as_the_timed_batch_does(monkeypatch):
    """A timed batch samples the outputs of its checked runs only, each once its run is over (inside the
    server's clock); the empty batch the server subtracts samples an output of the task's size after the runs
    its own order checks, drawn the same way, or the difference would charge those copies to the candidate's
    runs (the outside floor)."""
    import types

    from sandbox_service import timing
    from sandbox_service.executor import runner

    sampled: list[tuple[int, list[int]]] = []
    real_sample = harness.sample_indices
    runs_started: list[int] = []

    def sample_indices(numels, seed):
        sampled.append((len(runs_started), numels))
        return real_sample(numels, seed)

    real_make = runner.TimingInputs.__call__

    def make(self, index):
        runs_started.append(index)
        return real_make(self, index)

    monkeypatch.setattr(runner.TimingInputs, "__call__", make)
    monkeypatch.setattr(harness, "sample_indices", sample_indices)
    monkeypatch.setattr(timing, "time_cuda", time_on_the_cpu)
    monkeypatch.setattr(runner, "hand_over", lambda *args, **kwargs: None)
    job = {"timing_runs": 20, "warmup_runs": 3, "trial_key": "k", "max_timing_checks": 2, "trials": 2}
    replay = types.SimpleNamespace(run=lambda inputs: [inputs[0] * 2])
    output_bytes = 16 * 16 * 4
    for calibrate, seed in ((False, 11), (True, 12)):
        sampled.clear()
        runs_started.clear()
        made = runner.timing_inputs(job, Reference, seed, torch.device("cpu"))
        runner._time_checked(job, lambda kind, **fields: None, None, replay, made, [(7, 1234), (12, 99)],
                             calibrate=calibrate, copy_bytes=output_bytes)
        # inputs are made for the warm-up and each run; run 7's sample is drawn before run 8's inputs
        size = output_bytes // 4 if calibrate else 16 * 16
        assert sampled == [(9, [size]), (14, [size])], sampled


def test_several_checked_runs_are_handed_to_the_judge_in_order(monkeypatch):
    """With three checks, the three secret runs take the seeds the server chose for the judge, and the samples
    of their outputs that the server's sample seed names (harness.sample_indices, drawn anew for every call) go
    to the judge as the first set's trials 2, 3 and 4, in the order the server listed them."""
    import types

    from sandbox_service import timing
    from sandbox_service.executor import runner

    handed = {}
    monkeypatch.setattr(timing, "time_cuda", time_on_the_cpu)
    monkeypatch.setattr(runner, "hand_over", lambda job, emit, control, tensors, set_index, trial, fingerprint:
                        handed.update({trial: tensors[0]}))
    job = {"timing_runs": 20, "warmup_runs": 3, "trial_key": "k", "max_timing_checks": 3,
           "trials": 2}
    checks = [(15, 101), (3, 202), (9, 303)]
    replay = types.SimpleNamespace(run=lambda inputs: [inputs[0] * 2])
    runner._time_checked(job, lambda kind, **fields: None, None, replay,
                         runner.timing_inputs(job, Reference, 11, torch.device("cpu")), checks, calibrate=False,
                         sample_seed=77)
    assert sorted(handed) == [2, 3, 4]
    for check, (run, seed) in enumerate(checks):
        made = (harness.trial_inputs(Reference, seed, torch.device("cpu"))[0] * 2).reshape(-1)
        picked = harness.sample_indices([made.numel()], harness.call_sample_seed(77, job["warmup_runs"] + run))
        assert torch.equal(handed[2 + check], made[picked[0]])


def test_a_timing_order_is_new_every_time():
    """The server's secrets for a timing (evaluation.timing_order): nothing repeats between two timings, so no
    memory of an earlier evaluation finds the checked runs."""
    from sandbox_service.evaluation import timing_order

    first, second = timing_order(100, 5), timing_order(100, 5)
    assert first["run_seed"] != second["run_seed"] and not set(first["check_seeds"]) & set(second["check_seeds"])
    assert first["checked_runs"] != second["checked_runs"] or first["sample_seed"] != second["sample_seed"]
    assert first["checked_runs"] == sorted(set(first["checked_runs"])) and all(0 <= r < 100 for r in first["checked_runs"])
    assert len(first["check_seeds"]) == len(first["checked_runs"])


@pytest.mark.gpu
def test_on_a_gpu_what_the_judge_gets_from_the_timed_runs_lies_in_pageable_host_memory(monkeypatch):
    """A kernel can read and write any device memory of its context, and pinned host memory: the kept samples
    of the checked runs are in ordinary host memory, out of its reach."""
    import types

    from sandbox_service.executor import runner

    handed = {}
    monkeypatch.setattr(runner, "hand_over", lambda job, emit, control, tensors, set_index, trial, fingerprint:
                        handed.update({trial: tensors}))
    job = {"timing_runs": 20, "warmup_runs": 3, "trial_key": "k", "max_timing_checks": 3, "trials": 2}

    class Large:
        @staticmethod
        def get_inputs():
            return [torch.randn(512, 512)]

    replay = types.SimpleNamespace(run=lambda inputs: [inputs[0] * 2])
    runner._time_checked(job, lambda kind, **fields: None, None, replay,
                         runner.timing_inputs(job, Large, 11, torch.device("cuda")), [(15, 1), (3, 2), (9, 3)],
                         calibrate=False, sample_seed=5)
    assert sorted(handed) == [2, 3, 4]
    for tensors in handed.values():
        assert all(t.device.type == "cpu" and not t.is_pinned() for t in tensors)
        assert all(t.numel() == harness.TIMING_SAMPLE for t in tensors)
