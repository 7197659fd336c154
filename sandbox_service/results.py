"""Typed evaluation results: what every layer reports and what the CLI's `--json` prints.

This module must stay importable without torch (the trainer imports it through the client).
"""

from __future__ import annotations

import dataclasses
import enum
import json
from typing import Any


class Status(str, enum.Enum):
    """Final verdict of one evaluation (the JSON contract in docs/DESIGN.md)."""

    OK = "ok"
    INCORRECT = "incorrect"
    CHEAT = "cheat"
    FORMAT_ERROR = "format_error"
    COMPILE_ERROR = "compile_error"
    RUNTIME_ERROR = "runtime_error"
    TIMEOUT = "timeout"
    INFRA_ERROR = "infra_error"  # the sandbox failed: try again
    REFERENCE_ERROR = "reference_error"  # the reference cannot be judged against: fix the task, not the candidate

    @property
    def judges_the_candidate(self) -> bool:
        """False for the verdicts that say nothing about the candidate (they are never scored)."""
        return self not in (Status.INFRA_ERROR, Status.REFERENCE_ERROR)


class Outcome(str, enum.Enum):
    """What happened in one verifier layer."""

    PASSED = "passed"
    FAILED = "failed"
    SKIPPED = "skipped"
    ERROR = "error"


@dataclasses.dataclass(frozen=True)
class Violation:
    """One broken rule: which layer found it, the rule's stable name, and where."""

    layer: str
    rule: str
    message: str
    line: int | None = None


@dataclasses.dataclass
class LayerResult:
    name: str
    outcome: Outcome
    duration_s: float = 0.0
    detail: str = ""


@dataclasses.dataclass(frozen=True)
class TimingStats:
    """Summary of repeated timed runs, in microseconds."""

    median_us: float
    mean_us: float
    std_us: float
    min_us: float
    max_us: float
    runs: int
    method: str = "cuda_events"

    @property
    def cv(self) -> float:
        return self.std_us / self.mean_us if self.mean_us > 0 else 0.0


@dataclasses.dataclass
class EvalResult:
    status: Status
    correct: bool = False
    valid: bool = False
    compiled: bool = False
    violations: list[Violation] = dataclasses.field(default_factory=list)
    layers: list[LayerResult] = dataclasses.field(default_factory=list)
    trials: int = 0
    trials_passed: int = 0
    max_abs_error: float | None = None
    ref_time_us: float | None = None
    candidate_time_us: float | None = None
    speedup: float | None = None
    ref_timing: TimingStats | None = None
    candidate_timing: TimingStats | None = None
    speedup_flagged: bool = False
    degenerate_reference: bool = False
    triton_launches: int = 0
    backend: str = ""
    device: str = ""
    error: str = ""
    stdout_tail: str = ""
    duration_s: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        def convert(value: Any) -> Any:
            if isinstance(value, enum.Enum):
                return value.value
            if dataclasses.is_dataclass(value):
                return {f.name: convert(getattr(value, f.name)) for f in dataclasses.fields(value)}
            if isinstance(value, list):
                return [convert(v) for v in value]
            return value

        return convert(self)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> EvalResult:
        fields = {f.name for f in dataclasses.fields(cls)}
        kwargs = {k: v for k, v in data.items() if k in fields}
        kwargs["status"] = Status(kwargs["status"])
        kwargs["violations"] = [Violation(**v) for v in kwargs.get("violations", [])]
        kwargs["layers"] = [
            LayerResult(**{**layer, "outcome": Outcome(layer["outcome"])}) for layer in kwargs.get("layers", [])
        ]
        for key in ("ref_timing", "candidate_timing"):
            if kwargs.get(key) is not None:
                kwargs[key] = TimingStats(**kwargs[key])
        return cls(**kwargs)


class ValidationStatus(str, enum.Enum):
    """Verdict on a reference validated against itself."""

    OK = "ok"
    INVALID = "invalid"  # raises, not deterministic, degenerate, ignores its inputs, too big or too fast
    TIMEOUT = "timeout"
    INFRA_ERROR = "infra_error"  # the sandbox failed: try again


@dataclasses.dataclass
class InputSetReport:
    """One input set (the reference's own inputs are "default") of a validated reference."""

    name: str
    ok: bool = False
    reason: str = ""
    deterministic: bool = False
    varies_with_seed: bool = False
    degenerate: bool = False
    finite: bool = False
    output_shapes: list[list[int]] = dataclasses.field(default_factory=list)
    output_dtypes: list[str] = dataclasses.field(default_factory=list)
    input_bytes: int = 0
    output_bytes: int = 0
    peak_memory_mb: float = 0.0
    ref_time_us: float | None = None


@dataclasses.dataclass
class ValidationResult:
    status: ValidationStatus
    reason: str = ""
    backend: str = ""
    device: str = ""
    input_sets: list[InputSetReport] = dataclasses.field(default_factory=list)
    ref_timing: TimingStats | None = None
    duration_s: float = 0.0

    @property
    def ok(self) -> bool:
        return self.status == ValidationStatus.OK

    @property
    def ref_time_us(self) -> float | None:
        return None if self.ref_timing is None else self.ref_timing.median_us

    def to_dict(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["status"] = self.status.value
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ValidationResult:
        timing = data.get("ref_timing")
        return cls(
            status=ValidationStatus(data["status"]), reason=data.get("reason", ""), backend=data.get("backend", ""),
            device=data.get("device", ""), input_sets=[InputSetReport(**r) for r in data.get("input_sets", [])],
            ref_timing=TimingStats(**timing) if timing else None, duration_s=float(data.get("duration_s", 0.0)),
        )


class InductorStatus(str, enum.Enum):
    """What compiling a reference with TorchInductor gave."""

    OK = "ok"  # a standalone module
    FAILED = "failed"  # Inductor's output cannot stand alone (extern kernels, several graphs, ...), or it failed
    UNAVAILABLE = "unavailable"  # this torch cannot compile with Inductor here
    TIMEOUT = "timeout"
    INFRA_ERROR = "infra_error"  # the sandbox failed: try again


@dataclasses.dataclass
class InductorResult:
    """`source` is a standalone ModelNew module of plain @triton.jit kernels (status ok), not yet verified."""

    status: InductorStatus
    source: str = ""
    reason: str = ""
    kernels: int = 0
    helpers: list[str] = dataclasses.field(default_factory=list)
    backend: str = ""
    device: str = ""
    torch_version: str = ""
    duration_s: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["status"] = self.status.value
        return data


def truncate(text: str, limit: int = 4000) -> str:
    """Keep error text bounded: head and tail, with the cut marked."""
    if len(text) <= limit:
        return text
    half = limit // 2
    return f"{text[:half]}\n... [{len(text) - limit} characters cut] ...\n{text[-half:]}"
