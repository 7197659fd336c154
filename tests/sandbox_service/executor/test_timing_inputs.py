"""The timed runs' inputs: fresh for every run, the values the judge would make from the same seed, made
just before their run, with no other run's inputs alive."""

import torch

from sandbox_service.executor.runner import TimingInputs
from sandbox_service.worker import harness


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
    inputs(0)  # the warm-up and run 0 share run 0's inputs
    assert Reference.calls == 1 and list(inputs.ready) == [0]
    inputs(1)
    assert Reference.calls == 2 and list(inputs.ready) == [1]


def test_the_checked_run_takes_the_judges_seed():
    inputs = made()
    inputs.replace_seed(4, 12345)
    expected = harness.trial_inputs(Reference, 12345, torch.device("cpu"))[0]
    assert torch.equal(inputs(4)[0], expected)
