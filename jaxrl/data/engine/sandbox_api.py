"""The sandbox calls the build makes: reference validation, teacher-pair verification, Inductor modules.

`SandboxClient.validate` and input sets on `evaluate` are the service's (sandbox_service.options /
.results). `SandboxClient.inductor` is agreed but not in the service yet: `InductorResult` mirrors its
agreed fields until it is, and the build calls it only on a GPU with `data.inductor` on.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Protocol

from sandbox_service.options import EvalOptions, InputSet, ValidateOptions
from sandbox_service.results import EvalResult, ValidationResult


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
    """The calls of SandboxClient the build makes (a fake in tests); `inductor` only on a GPU."""

    def validate(self, reference: str, input_sets: Sequence[InputSet] = (),
                 options: ValidateOptions | None = None) -> ValidationResult: ...

    def evaluate(self, reference: str, candidate: str, options: EvalOptions | None = None, *,
                 input_sets: Sequence[InputSet] = ()) -> EvalResult: ...

    def inductor(self, reference: str, timeout_s: float = 600.0) -> InductorResult: ...


def status_name(status: object) -> str:
    """A status enum member or string as its plain string ("ok", "infra_error", ...)."""
    return str(getattr(status, "value", status))
