"""Validate: a reference checked against itself in a fresh process; every way a task can be bad is named."""

from __future__ import annotations

import pytest

from sandbox_cases import CANCELLING, HALF_REFERENCE, REFERENCE
from sandbox_service.options import InputSet, ValidateOptions
from sandbox_service.results import ValidationStatus
from sandbox_service.validation import validate, validate_batch

OPTIONS = ValidateOptions(seeds=3, timeout_s=60, memory_limit_mb=4096)


def _variant(forward_body: str) -> str:
    """The scaled-add reference with another forward body."""
    start = REFERENCE.index("    def forward(")
    end = REFERENCE.index("\n\n", start)
    head = REFERENCE[start:end].splitlines()[0]
    return REFERENCE[:start] + head + "\n" + forward_body + REFERENCE[end:]


def test_a_good_reference_is_ok_with_a_report_per_input_set(cpu_lane):
    wide = InputSet("wide", "def get_inputs():\n    return [torch.randn(8, 4096), torch.randn(8, 4096)]\n")
    result = validate(REFERENCE, [wide], OPTIONS, cpu_lane)
    assert result.status == ValidationStatus.OK, result.reason
    assert [r.name for r in result.input_sets] == ["default", "wide"]
    report = result.input_sets[0]
    assert report.ok and report.deterministic and report.varies_with_seed and report.finite and not report.degenerate
    assert report.output_shapes and report.output_dtypes == ["float32"] and report.input_bytes > 0
    assert result.ref_timing is None  # the interpreter times nothing


@pytest.mark.parametrize("body, reason", [
    ("        raise RuntimeError('broken forward')", "raises: RuntimeError: broken forward"),
    ("        return a * 1e-4", "degenerate outputs"),
    ("        return self.bias.expand(a.shape[0], -1) * 10", "do not change with the inputs"),
    ("        return a + torch.randn_like(a)", "not deterministic"),
    ("        return a / 0.0", "non-finite outputs"),
])
def test_a_bad_reference_is_invalid_with_its_reason(cpu_lane, body, reason):
    result = validate(_variant(body), [], OPTIONS, cpu_lane)
    assert result.status == ValidationStatus.INVALID
    assert reason in result.reason, result.reason


def test_a_bad_input_set_is_named(cpu_lane):
    broken = InputSet("broken", "def get_inputs():\n    return [torch.randn(8, 7), torch.randn(8, 7)]\n")
    result = validate(REFERENCE, [broken], OPTIONS, cpu_lane)
    assert result.status == ValidationStatus.INVALID and result.reason.startswith("input set broken: raises")
    assert result.input_sets[0].ok and not result.input_sets[1].ok


def test_a_hang_is_a_timeout_and_a_memory_blowup_is_invalid(cpu_lane):
    hang = validate(_variant("        while True:\n            pass"), [], ValidateOptions(timeout_s=3), cpu_lane)
    assert hang.status == ValidationStatus.TIMEOUT
    hog = _variant("        self.hog = torch.ones(64 * 2**20, 16)\n        return a + b")
    blowup = validate(hog, [], ValidateOptions(timeout_s=60, memory_limit_mb=1024), cpu_lane)
    assert blowup.status == ValidationStatus.INVALID
    assert "memory" in blowup.reason, blowup.reason


def test_a_module_that_does_not_load_is_invalid(cpu_lane):
    result = validate("import torch\nraise ImportError('no such thing')\n", [], OPTIONS, cpu_lane)
    assert result.status == ValidationStatus.INVALID and "does not load" in result.reason


def test_a_batch_gives_each_reference_its_own_verdict_and_goes_on_after_a_hang_or_a_crash(cpu_lane, monkeypatch):
    spawned = []
    spawn = cpu_lane.spawn
    monkeypatch.setattr(cpu_lane, "spawn", lambda role: spawned.append(role) or spawn(role))
    wide = InputSet("wide", "def get_inputs():\n    return [torch.randn(8, 4096), torch.randn(8, 4096)]\n")
    hog = _variant("        self.hog = torch.ones(64 * 2**20, 16)\n        return a + b")
    items = [
        (REFERENCE, [wide]),
        (_variant("        raise RuntimeError('broken forward')"), []),
        ("import torch\nraise ImportError('no such thing')\n", []),
        (_variant("        while True:\n            pass"), []),  # killed at the timeout: a fresh process goes on
        (_variant("        return a - b"), []),
        (_variant("        import os\n        os._exit(3)"), []),  # its process dies: a fresh one goes on
        (hog, []),  # its allocation fails under the address-space limit: an error of its own
        (REFERENCE, []),
    ]
    results = validate_batch(items, ValidateOptions(seeds=3, timeout_s=8, memory_limit_mb=1024), cpu_lane)
    assert [r.status for r in results] == [
        ValidationStatus.OK, ValidationStatus.INVALID, ValidationStatus.INVALID, ValidationStatus.TIMEOUT,
        ValidationStatus.OK, ValidationStatus.INVALID, ValidationStatus.INVALID, ValidationStatus.OK,
    ], [r.reason for r in results]
    assert [r.name for r in results[0].input_sets] == ["default", "wide"]
    assert "broken forward" in results[1].reason and "does not load" in results[2].reason
    assert "validator process" in results[5].reason and "memory" in results[6].reason
    assert all(r.duration_s > 0 for r in results)
    assert spawned == ["validator"] * 3  # the first process, and a fresh one after the hang and the crash


def test_one_reference_is_a_batch_of_one(cpu_lane):
    single = validate(REFERENCE, [], OPTIONS, cpu_lane)
    batched = validate_batch([(REFERENCE, [])], OPTIONS, cpu_lane)
    assert len(batched) == 1 and batched[0].status == single.status == ValidationStatus.OK
    assert batched[0].input_sets[0].output_shapes == single.input_sets[0].output_shapes


def test_a_reference_that_changes_global_settings_does_not_change_the_next_ones_verdict(cpu_lane):
    doubles = _variant("        torch.set_default_dtype(torch.float64)\n        torch.set_grad_enabled(False)\n"
                       "        return a + b")
    results = validate_batch([(doubles, []), (REFERENCE, [])], OPTIONS, cpu_lane)
    assert [r.status for r in results] == [ValidationStatus.OK, ValidationStatus.OK], [r.reason for r in results]
    assert results[1].input_sets[0].output_dtypes == ["float32"]


def test_a_16_bit_reference_must_agree_with_itself_computed_in_float32(cpu_lane):
    items = [
        (HALF_REFERENCE.format(body=CANCELLING, dtype="float16"), []),
        (HALF_REFERENCE.format(body=CANCELLING, dtype="bfloat16"), []),
        (HALF_REFERENCE.format(body="        return a * b + 1.0", dtype="float16"), []),
        # one that refuses float32 has only its own precision to be judged by
        (HALF_REFERENCE.format(body="        assert a.dtype == torch.float16\n" + CANCELLING, dtype="float16"), []),
        # 16-bit arithmetic behind a float32 output is checked too
        (HALF_REFERENCE.format(body=CANCELLING.replace("return (big + b) - big", "return ((big + b) - big).float()"),
                               dtype="float16"), []),
        # a forward that changes its (float32) input in place: the float32 run gets inputs of its own
        (HALF_REFERENCE.format(body="        a.mul_(2)\n        return a.half() + b", dtype="float16").replace(
            "torch.randn(64, 256, dtype=torch.float16), torch", "torch.randn(64, 256), torch"), []),
    ]
    results = validate_batch(items, OPTIONS, cpu_lane)
    assert [r.status for r in results] == [ValidationStatus.INVALID, ValidationStatus.INVALID, ValidationStatus.OK,
                                           ValidationStatus.OK, ValidationStatus.INVALID, ValidationStatus.OK], \
        [r.reason for r in results]
    for result, dtype in zip([*results[:2], results[4]], ("float16", "bfloat16", "float32")):
        assert "unstable in its precision" in result.reason and f"output 0 ({dtype})" in result.reason, result.reason
        assert "computed in float32" in result.reason
