"""The float32-check survey: only 16-bit tasks are validated, in batches the sandbox accepts, and each
verdict is counted under its family and dtype."""

from __future__ import annotations

import collections

from jaxrl.data.engine.generator import generate_tasks, list_families
from sandbox_service.results import ValidationResult, ValidationStatus

from benchmark_scripts import load_benchmark

survey = load_benchmark("float32_check_survey")


class _FakeClient:
    """Calls a reference unstable when it uses torch.cumsum, invalid for another reason when it uses mse_loss."""

    def __init__(self):
        self.batches: list[int] = []

    def validate_batch(self, items, options):
        self.batches.append(len(items))
        assert not options.time
        return [ValidationResult(ValidationStatus.INVALID, "input set default: unstable in its precision: ...", device="fake")
                if "torch.cumsum(" in code else
                ValidationResult(ValidationStatus.INVALID, "input set default: degenerate outputs", device="fake")
                if "mse_loss(" in code else ValidationResult(ValidationStatus.OK, device="fake")
                for code, _ in items]


def test_only_16_bit_tasks_are_validated_and_counted_by_family_and_dtype():
    client = _FakeClient()
    report = survey.survey(client, per_family=6, scale="cpu", seed=0)
    assert report["device"] == "fake" and sum(client.batches) == report["tasks"] > 0
    assert all(size <= survey.BATCH for size in client.batches)
    assert set(report["validated"]) and all(key.split("/")[1] in ("float16", "bfloat16") for key in report["validated"])
    tasks = [t for t in generate_tasks(0, 6 * len(list_families()), "cpu") if t.dtype in ("float16", "bfloat16")]
    unstable = collections.Counter(f"{t.family}/{t.dtype}" for t in tasks if "torch.cumsum(" in t.code)
    assert unstable and report["unstable"] == dict(unstable)
    assert report["other_invalid"] and all("mse_loss" in key for key in report["other_invalid"])
    assert sum(report["validated"].values()) == report["tasks"]
