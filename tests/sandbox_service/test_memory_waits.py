"""A judge out of GPU memory is load (a trainer or other evaluations hold the memory), not a verdict: the
evaluation waits and tries again, and says so when the memory never comes back."""

from __future__ import annotations

import pytest

import sandbox_service.evaluation as evaluation
from sandbox_cases import CORRECT, FAST, REFERENCE
from sandbox_service.evaluation import evaluate
from sandbox_service.results import Status


def _reference_out_of_memory(marker, times: int) -> str:
    """REFERENCE whose forward raises CUDA's out-of-memory error the first `times` times (counted in a file)."""
    forward = "    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:\n"
    assert forward in REFERENCE
    raise_first = (
        f"        import pathlib\n        marker = pathlib.Path({str(marker)!r})\n"
        "        count = int(marker.read_text()) if marker.exists() else 0\n"
        f"        if count < {times}:\n            marker.write_text(str(count + 1))\n"
        "            raise torch.cuda.OutOfMemoryError('CUDA out of memory. Tried to allocate 6.00 GiB')\n"
    )
    return REFERENCE.replace(forward, forward + raise_first)


@pytest.fixture
def short_waits(monkeypatch):
    monkeypatch.setattr(evaluation, "MEMORY_WAITS_S", (0.2, 0.2))


def test_a_reference_out_of_memory_for_a_while_is_tried_again(cpu_lane, short_waits, tmp_path):
    reference = _reference_out_of_memory(tmp_path / "count", times=2)
    result = evaluate(reference, CORRECT, FAST, cpu_lane)
    assert result.status == Status.OK, result.error
    assert (tmp_path / "count").read_text() == "2"


def test_memory_that_never_comes_back_is_an_infra_error_that_names_it(cpu_lane, short_waits, tmp_path):
    reference = _reference_out_of_memory(tmp_path / "count", times=100)
    result = evaluate(reference, CORRECT, FAST, cpu_lane)
    assert result.status == Status.INFRA_ERROR
    assert "out of GPU memory preparing the reference 3 times" in result.error
    assert "other processes on this GPU hold it" in result.error and "Tried to allocate 6.00 GiB" in result.error
