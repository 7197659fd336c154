"""The timed runs' inputs: fresh for every run, the same values the judge would make from the same seed,
made a chunk at a time within a memory budget."""

import torch

from sandbox_service.executor.runner import TimingInputs
from sandbox_service.worker import harness


class Reference:
    """A reference module's get_inputs: one 1 KiB tensor and a number."""

    calls = 0

    @classmethod
    def get_inputs(cls):
        cls.calls += 1
        return [torch.randn(16, 16), 3]


def made(budget: int, runs: int = 10) -> TimingInputs:
    Reference.calls = 0
    return TimingInputs(Reference, harness.trial_seeds(5, runs), torch.device("cpu"), budget)


def test_every_run_gets_its_own_seeds_inputs():
    inputs = made(budget=1 << 20)
    seen = [inputs(i)[0] for i in range(10)]
    for i, tensor in enumerate(seen):
        assert torch.equal(tensor, harness.trial_inputs(Reference, inputs.seeds[i], torch.device("cpu"))[0])
    assert len({t.sum().item() for t in seen}) == 10


def test_inputs_are_made_a_chunk_at_a_time_within_the_budget():
    inputs = made(budget=3 * 16 * 16 * 4)  # three sets
    inputs.prepare()
    assert Reference.calls == 3 and sorted(inputs.ready) == [0, 1, 2]
    inputs(2)
    assert Reference.calls == 3
    inputs(3)
    assert sorted(inputs.ready) == [3, 4, 5]  # the last chunk's sets are dropped


def test_a_set_larger_than_the_budget_is_made_alone():
    inputs = made(budget=1)
    inputs.prepare()
    assert sorted(inputs.ready) == [0]


def test_the_checked_run_takes_the_judges_seed_even_when_already_made():
    inputs = made(budget=1 << 20)
    inputs.prepare()
    inputs.replace_seed(4, 12345)
    expected = harness.trial_inputs(Reference, 12345, torch.device("cpu"))[0]
    assert torch.equal(inputs(4)[0], expected)
