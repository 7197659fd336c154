"""Whatever the candidate's code does in its child process, the verdict stays right and the lane keeps working."""

from __future__ import annotations

import dataclasses

import pytest

from sandbox_cases import CORRECT, FAST, INCORRECT, REFERENCE, fixture_candidate
from sandbox_service.evaluation import evaluate, run_isolated
from sandbox_service.results import Status


def test_correct_kernel_is_ok(cpu_lane):
    result = evaluate(REFERENCE, CORRECT, FAST, cpu_lane)
    assert result.status == Status.OK, result.error
    assert result.correct and result.valid and result.compiled
    assert result.trials_passed == result.trials == 2
    assert result.triton_launches == 2
    assert result.speedup is None  # nothing is timed on the interpreter
    assert [layer.name for layer in result.layers][:2] == ["format", "static"]


def test_autotuned_kernel_runs_on_the_interpreter(cpu_lane):
    result = evaluate(REFERENCE, fixture_candidate("autotuned"), FAST, cpu_lane)
    assert result.status == Status.OK, result.error


def test_wrong_kernel_is_incorrect(cpu_lane):
    result = evaluate(REFERENCE, INCORRECT, FAST, cpu_lane)
    assert result.status == Status.INCORRECT
    assert result.valid and result.compiled and not result.correct
    assert result.trials_passed == 0 and result.max_abs_error > 1


@pytest.mark.parametrize(
    "name, status",
    [
        ("compile_error", Status.COMPILE_ERROR),
        ("runtime_error", Status.RUNTIME_ERROR),
        ("segfault", Status.RUNTIME_ERROR),
        ("fake_verdict", Status.INCORRECT),
    ],
)
def test_failures_get_their_status(cpu_lane, name, status):
    result = evaluate(REFERENCE, fixture_candidate(name), FAST, cpu_lane)
    assert result.status == status, (result.status, result.error)
    assert not result.correct


def test_hang_is_a_timeout_and_the_child_is_killed(cpu_lane):
    result = evaluate(REFERENCE, fixture_candidate("timeout"), dataclasses.replace(FAST, timeout_s=6), cpu_lane)
    assert result.status == Status.TIMEOUT
    assert result.duration_s < 30


def test_output_flood_is_bounded_and_does_not_change_the_verdict(cpu_lane):
    result = evaluate(REFERENCE, fixture_candidate("flood"), FAST, cpu_lane)
    assert result.status == Status.OK, result.error
    assert "bytes of output dropped" in result.stdout_tail or len(result.stdout_tail) <= 4000
    assert len(result.stdout_tail) <= 4000


def test_memory_limit_is_enforced(cpu_lane):
    options = dataclasses.replace(FAST, memory_limit_mb=2048)
    result = evaluate(REFERENCE, fixture_candidate("memory_hog"), options, cpu_lane)
    assert result.status == Status.RUNTIME_ERROR
    assert "memory" in result.error.lower() or "MemoryError" in result.error


# The next two run code the static layer would reject, to show the isolation holds on its own.
def test_abrupt_exit_is_a_runtime_error(cpu_lane):
    result = run_isolated(REFERENCE, fixture_candidate("os_exit"), FAST, cpu_lane)
    assert result.status == Status.RUNTIME_ERROR
    assert "exited with code 3" in result.error


def test_forged_frames_on_every_descriptor_never_pass(cpu_lane):
    result = run_isolated(REFERENCE, fixture_candidate("channel_forgery"), FAST, cpu_lane)
    assert result.status in (Status.CHEAT, Status.INCORRECT, Status.RUNTIME_ERROR)
    assert not result.correct


def test_the_lane_still_works_after_all_that(cpu_lane):
    assert evaluate(REFERENCE, CORRECT, FAST, cpu_lane).status == Status.OK


@pytest.mark.parametrize(
    "reference, first_line",
    [
        ("import torch\nraise RuntimeError('broken problem')\n", "RuntimeError: broken problem"),
        ("", "AttributeError: module 'tritonrl_reference' has no attribute 'get_init_inputs'"),
        (REFERENCE.replace("def get_inputs(", "def no_inputs("), "has no attribute 'get_inputs'"),
        (REFERENCE.replace("def get_inputs():", "def get_inputs():\n    return [torch.empty(40_000_000_000)]\n"
                           "def no_inputs():"), "can't allocate memory"),
    ],
    ids=["raises", "empty", "no-get-inputs", "absurd-input-size"],
)
def test_a_broken_reference_is_a_reference_error_never_the_candidates(cpu_lane, reference, first_line):
    result = evaluate(reference, CORRECT, FAST, cpu_lane)
    assert result.status == Status.REFERENCE_ERROR and not result.correct
    headline = result.error.splitlines()[0]
    assert headline.startswith("the reference failed: ") and first_line in headline


def test_a_reference_slower_than_the_timeout_is_its_own_fault_not_a_candidate_timeout(cpu_lane):
    slow = REFERENCE.replace("import torch\n", "import time\nimport torch\n", 1).replace(
        "    def forward(self, ", "    def forward(self, *args):\n        time.sleep(30)\n\n    def unused(self, ", 1)
    result = evaluate(slow, CORRECT, dataclasses.replace(FAST, timeout_s=3.0), cpu_lane)
    assert result.status == Status.REFERENCE_ERROR
    assert result.error.startswith("the reference did not finish within 3 s while being prepared")


def test_nondeterministic_inputs_are_an_infrastructure_error(cpu_lane):
    reference = REFERENCE.replace("def get_inputs():", "import os\ndef get_inputs():\n    torch.manual_seed(os.getpid())")
    result = evaluate(reference, CORRECT, FAST, cpu_lane)
    assert result.status == Status.INFRA_ERROR
    assert "not deterministic" in result.error
