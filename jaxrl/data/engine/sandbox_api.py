"""The sandbox calls the build makes, typed: reference validation, teacher-pair verification, Inductor.

The sandbox service is gaining `SandboxClient.validate`, `SandboxClient.inductor` and input sets on
`evaluate` (with ValidateOptions, ValidationResult, InputSetReport and InductorResult in
sandbox_service.options / .results). This checkout's client predates them, so the build is written
against the mirrors below, which carry the agreed fields, and is tested with a fake client. When the
service's own types land, import them here instead of defining them.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Sequence
from typing import Protocol

from sandbox_service.options import EvalOptions, InputSet
from sandbox_service.results import EvalResult


class ValidationStatus(str, enum.Enum):
    OK = "ok"
    INVALID = "invalid"
    TIMEOUT = "timeout"
    INFRA_ERROR = "infra_error"


@dataclasses.dataclass(frozen=True)
class ValidateOptions:
    """How a reference is checked: run over `seeds` seeds it must give the same, non-degenerate, finite
    outputs within `memory_limit_mb`; with `time` (GPU) its time must be at least `min_ref_time_us`."""

    seeds: int = 3
    time: bool = True
    min_ref_time_us: float = 0.0
    memory_limit_mb: int = 16384
    timeout_s: float = 300.0


@dataclasses.dataclass(frozen=True)
class InputSetReport:
    """What the reference did on one set of inputs (its own, or one of the task's input sets)."""

    name: str
    ok: bool
    reason: str = ""
    deterministic: bool = True
    degenerate: bool = False
    finite: bool = True
    output_shapes: list[list[int]] = dataclasses.field(default_factory=list)
    output_dtypes: list[str] = dataclasses.field(default_factory=list)
    input_bytes: int = 0
    output_bytes: int = 0
    peak_memory_mb: float = 0.0
    ref_time_us: float | None = None


@dataclasses.dataclass(frozen=True)
class ValidationResult:
    status: ValidationStatus
    reason: str = ""
    backend: str = ""
    device: str = ""
    input_sets: list[InputSetReport] = dataclasses.field(default_factory=list)
    duration_s: float = 0.0


@dataclasses.dataclass(frozen=True)
class InductorResult:
    """`source` is a standalone ModelNew module (plain @triton.jit kernels); status ok, failed or
    unavailable (the CPU interpreter has no Inductor path)."""

    status: str
    source: str = ""
    reason: str = ""
    kernels: int = 0
    duration_s: float = 0.0


class BuildClient(Protocol):
    """The three calls of SandboxClient the build makes (a fake in tests)."""

    def validate(self, reference: str, input_sets: Sequence[InputSet] = (),
                 options: ValidateOptions | None = None) -> ValidationResult: ...

    def evaluate(self, reference: str, candidate: str, options: EvalOptions | None = None, *,
                 input_sets: tuple[InputSet, ...] = (), timeout_s: float | None = None) -> EvalResult: ...

    def inductor(self, reference: str, timeout_s: float = 600.0) -> InductorResult: ...


def status_name(status: object) -> str:
    """A status enum member or string as its plain string ("ok", "infra_error", ...)."""
    return str(getattr(status, "value", status))
