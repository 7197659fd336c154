"""Input augmentation: a candidate is correct only if it is correct on every input set of the task."""

from __future__ import annotations

import grpc
import pytest

from sandbox_cases import CORRECT, FAST, REFERENCE
from sandbox_service.client import SandboxClient
from sandbox_service.evaluation import evaluate
from sandbox_service.options import InputSet
from sandbox_service.results import Status

TALL = InputSet("tall", "def get_inputs():\n    return [torch.randn(32, N), torch.randn(32, N)]\n")
# A set that also changes the constructor's arguments: the model is built again for it.
OTHER_ALPHA = InputSet("alpha2", "def get_init_inputs():\n    return [2.0]\n\n\n"
                                 "def get_inputs():\n    return [torch.randn(3, N), torch.randn(3, N)]\n")
HARDCODED = CORRECT.replace("n = a.numel()", "n = 8 * 4096")


def test_a_general_kernel_passes_every_input_set(cpu_lane):
    result = evaluate(REFERENCE, CORRECT, FAST, cpu_lane, input_sets=[TALL, OTHER_ALPHA])
    assert result.status == Status.OK, result.error
    assert result.trials == 3 * FAST.trials and result.trials_passed == result.trials


def test_a_kernel_hardcoding_the_shape_fails_on_another_shape(cpu_lane):
    assert "n = 8 * 4096" in HARDCODED
    assert evaluate(REFERENCE, HARDCODED, FAST, cpu_lane).status == Status.OK
    result = evaluate(REFERENCE, HARDCODED, FAST, cpu_lane, input_sets=[TALL])
    assert result.status == Status.INCORRECT and result.error.startswith("tall trial 0")


def test_input_sets_travel_through_the_server(server):
    with SandboxClient([server.address], default_options=FAST) as client:
        assert client.evaluate(REFERENCE, HARDCODED, input_sets=[TALL]).status == Status.INCORRECT
        assert client.evaluate(REFERENCE, CORRECT, input_sets=[TALL]).status == Status.OK
        with pytest.raises(ValueError, match="unique"):
            client.evaluate(REFERENCE, CORRECT, input_sets=[TALL, TALL])


def test_validate_travels_through_the_server(server):
    with SandboxClient([server.address]) as client:
        result = client.validate(REFERENCE, [TALL])
        assert result.ok, result.reason
        assert [r.name for r in result.input_sets] == ["default", "tall"]
        assert result.input_sets[1].output_shapes == [[32, 4096]]
        bad = client.validate(REFERENCE.replace("return self.alpha * a + b + self.bias", "return a * 1e-4"))
        assert bad.status.value == "invalid" and "degenerate" in bad.reason
    assert grpc  # the stubs are the ones the server uses
