"""The sandbox calls the build makes: reference validation, teacher-pair verification, Inductor modules
(`SandboxClient.validate_batch` and `.validate`, `.evaluate` with input sets, `.inductor`; types from
sandbox_service)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from sandbox_service.options import EvalOptions, InductorOptions, InputSet, ValidateOptions
from sandbox_service.results import EvalResult, InductorResult, ValidationResult


class BuildClient(Protocol):
    """The calls of SandboxClient the build makes (a fake in tests); `inductor` only with data.inductor."""

    def validate(self, reference: str, input_sets: Sequence[InputSet] = (),
                 options: ValidateOptions | None = None) -> ValidationResult: ...

    def validate_batch(self, items: Sequence[tuple[str, Sequence[InputSet]]],
                       options: ValidateOptions | None = None) -> list[ValidationResult]: ...

    def evaluate(self, reference: str, candidate: str, options: EvalOptions | None = None, *,
                 input_sets: Sequence[InputSet] = ()) -> EvalResult: ...

    def inductor(self, reference: str, options: InductorOptions | None = None) -> InductorResult: ...


def status_name(status: object) -> str:
    """A status enum member or string as its plain string ("ok", "infra_error", ...)."""
    return str(getattr(status, "value", status))
