"""Conversions between the typed dataclasses and the wire messages. No torch here (clients use it)."""

from __future__ import annotations

from collections.abc import Sequence

from sandbox_service.options import EvalOptions, InductorOptions, InputSet, ValidateOptions
from sandbox_service.results import (
    EvalResult, InductorResult, InductorStatus, InputSetReport, LayerResult, Outcome, Status, TimingStats,
    ValidationResult, ValidationStatus, Violation,
)
from tritonrl.sandbox.v1 import sandbox_pb2 as pb

_STATUS_TO_PB = {status: getattr(pb, f"STATUS_{status.name}") for status in Status}
_STATUS_FROM_PB = {v: k for k, v in _STATUS_TO_PB.items()}
_OUTCOME_TO_PB = {outcome: getattr(pb, f"LAYER_OUTCOME_{outcome.name}") for outcome in Outcome}
_OUTCOME_FROM_PB = {v: k for k, v in _OUTCOME_TO_PB.items()}
_VALIDATION_TO_PB = {status: getattr(pb, f"VALIDATION_STATUS_{status.name}") for status in ValidationStatus}
_VALIDATION_FROM_PB = {v: k for k, v in _VALIDATION_TO_PB.items()}
_INDUCTOR_TO_PB = {status: getattr(pb, f"INDUCTOR_STATUS_{status.name}") for status in InductorStatus}
_INDUCTOR_FROM_PB = {v: k for k, v in _INDUCTOR_TO_PB.items()}
_INDUCTOR_OPTION_FIELDS = ("seed", "timeout_s", "memory_limit_mb")
_VALIDATE_OPTION_FIELDS = ("seeds", "seed", "time", "min_ref_time_us", "warmup_runs", "timing_runs", "timeout_s",
                           "memory_limit_mb")
_OPTIONAL_OPTION_FIELDS = (
    "trials",
    "seed",
    "time",
    "warmup_runs",
    "timing_runs",
    "timeout_s",
    "policy",
    "candidate_format",
    "implausible_speedup",
    "memory_limit_mb",
    "degenerate_rel_l2",
)


def options_to_pb(options: EvalOptions | None) -> pb.EvalOptions:
    message = pb.EvalOptions()
    if options is None:
        return message
    data = options.to_dict()
    for name in _OPTIONAL_OPTION_FIELDS:
        setattr(message, name, data[name])
    for dtype, (atol, rtol) in options.tolerances.items():
        message.tolerances.add(dtype=dtype, atol=atol, rtol=rtol)
    return message


def options_from_pb(message: pb.EvalOptions, defaults: EvalOptions | None = None) -> EvalOptions:
    """Fields the client left unset take the server's defaults. Raises ValueError for invalid values."""
    data = (defaults or EvalOptions()).to_dict()
    for name in _OPTIONAL_OPTION_FIELDS:
        if message.HasField(name):
            data[name] = getattr(message, name)
    if message.tolerances:
        data["tolerances"] = {t.dtype: (t.atol, t.rtol) for t in message.tolerances}
    return EvalOptions.from_dict(data)


def _timing_to_pb(stats: TimingStats | None, target: pb.TimingStats) -> None:
    if stats is not None:
        target.CopyFrom(pb.TimingStats(**stats.__dict__))


def _timing_from_pb(message: pb.TimingStats, present: bool) -> TimingStats | None:
    if not present:
        return None
    return TimingStats(
        median_us=message.median_us,
        mean_us=message.mean_us,
        std_us=message.std_us,
        min_us=message.min_us,
        max_us=message.max_us,
        runs=message.runs,
        method=message.method,
    )


def result_to_pb(result: EvalResult) -> pb.EvalResult:
    message = pb.EvalResult(
        status=_STATUS_TO_PB[result.status],
        correct=result.correct,
        valid=result.valid,
        compiled=result.compiled,
        trials=result.trials,
        trials_passed=result.trials_passed,
        speedup_flagged=result.speedup_flagged,
        degenerate_reference=result.degenerate_reference,
        triton_launches=result.triton_launches,
        backend=result.backend,
        device=result.device,
        error=result.error,
        stdout_tail=result.stdout_tail,
        duration_s=result.duration_s,
    )
    for name in ("max_abs_error", "ref_time_us", "candidate_time_us", "speedup"):
        value = getattr(result, name)
        if value is not None:
            setattr(message, name, value)
    for v in result.violations:
        item = message.violations.add(layer=v.layer, rule=v.rule, message=v.message)
        if v.line is not None:
            item.line = v.line
    for layer in result.layers:
        message.layers.add(
            name=layer.name, outcome=_OUTCOME_TO_PB[layer.outcome], duration_s=layer.duration_s, detail=layer.detail
        )
    _timing_to_pb(result.ref_timing, message.ref_timing)
    _timing_to_pb(result.candidate_timing, message.candidate_timing)
    return message


def result_from_pb(message: pb.EvalResult) -> EvalResult:
    def optional(name: str) -> float | None:
        return getattr(message, name) if message.HasField(name) else None

    return EvalResult(
        status=_STATUS_FROM_PB.get(message.status, Status.INFRA_ERROR),
        correct=message.correct,
        valid=message.valid,
        compiled=message.compiled,
        violations=[
            Violation(v.layer, v.rule, v.message, v.line if v.HasField("line") else None) for v in message.violations
        ],
        layers=[
            LayerResult(layer.name, _OUTCOME_FROM_PB.get(layer.outcome, Outcome.ERROR), layer.duration_s, layer.detail)
            for layer in message.layers
        ],
        trials=message.trials,
        trials_passed=message.trials_passed,
        max_abs_error=optional("max_abs_error"),
        ref_time_us=optional("ref_time_us"),
        candidate_time_us=optional("candidate_time_us"),
        speedup=optional("speedup"),
        ref_timing=_timing_from_pb(message.ref_timing, message.HasField("ref_timing")),
        candidate_timing=_timing_from_pb(message.candidate_timing, message.HasField("candidate_timing")),
        speedup_flagged=message.speedup_flagged,
        degenerate_reference=message.degenerate_reference,
        triton_launches=message.triton_launches,
        backend=message.backend,
        device=message.device,
        error=message.error,
        stdout_tail=message.stdout_tail,
        duration_s=message.duration_s,
    )


def input_sets_to_pb(input_sets: Sequence[InputSet], target) -> None:
    for item in input_sets:
        target.add(name=item.name, source=item.source)


def input_sets_from_pb(messages) -> tuple[InputSet, ...]:
    """Raises ValueError for a malformed or duplicate input set."""
    sets = tuple(InputSet(m.name, m.source) for m in messages)
    names = [s.name for s in sets]
    if len(set(names)) != len(names) or "default" in names:
        raise ValueError(f"input set names must be unique and not 'default', got {names}")
    return sets


def validate_options_to_pb(options: ValidateOptions | None) -> pb.ValidateOptions:
    message = pb.ValidateOptions()
    if options is None:
        return message
    for name in _VALIDATE_OPTION_FIELDS:
        setattr(message, name, getattr(options, name))
    for dtype, (atol, rtol) in options.tolerances.items():
        message.tolerances.add(dtype=dtype, atol=atol, rtol=rtol)
    return message


def validate_options_from_pb(message: pb.ValidateOptions) -> ValidateOptions:
    data = {name: getattr(message, name) for name in _VALIDATE_OPTION_FIELDS if message.HasField(name)}
    if message.tolerances:
        data["tolerances"] = {t.dtype: (t.atol, t.rtol) for t in message.tolerances}
    return ValidateOptions(**data)


def validation_to_pb(result: ValidationResult) -> pb.ValidationResult:
    message = pb.ValidationResult(status=_VALIDATION_TO_PB[result.status], reason=result.reason,
                                  backend=result.backend, device=result.device, duration_s=result.duration_s)
    for report in result.input_sets:
        item = message.input_sets.add(
            name=report.name, ok=report.ok, reason=report.reason, deterministic=report.deterministic,
            varies_with_seed=report.varies_with_seed, degenerate=report.degenerate, finite=report.finite,
            output_dtypes=report.output_dtypes, input_bytes=report.input_bytes, output_bytes=report.output_bytes,
            peak_memory_mb=report.peak_memory_mb,
        )
        for shape in report.output_shapes:
            item.output_shapes.add(dims=shape)
        if report.ref_time_us is not None:
            item.ref_time_us = report.ref_time_us
    _timing_to_pb(result.ref_timing, message.ref_timing)
    return message


def validation_from_pb(message: pb.ValidationResult) -> ValidationResult:
    return ValidationResult(
        status=_VALIDATION_FROM_PB.get(message.status, ValidationStatus.INFRA_ERROR),
        reason=message.reason, backend=message.backend, device=message.device,
        input_sets=[
            InputSetReport(
                name=r.name, ok=r.ok, reason=r.reason, deterministic=r.deterministic, varies_with_seed=r.varies_with_seed,
                degenerate=r.degenerate, finite=r.finite, output_shapes=[list(s.dims) for s in r.output_shapes],
                output_dtypes=list(r.output_dtypes), input_bytes=r.input_bytes, output_bytes=r.output_bytes,
                peak_memory_mb=r.peak_memory_mb, ref_time_us=r.ref_time_us if r.HasField("ref_time_us") else None,
            )
            for r in message.input_sets
        ],
        ref_timing=_timing_from_pb(message.ref_timing, message.HasField("ref_timing")),
        duration_s=message.duration_s,
    )


def inductor_options_to_pb(options: InductorOptions | None) -> pb.InductorOptions:
    message = pb.InductorOptions()
    if options is None:
        return message
    for name in _INDUCTOR_OPTION_FIELDS:
        setattr(message, name, getattr(options, name))
    return message


def inductor_options_from_pb(message: pb.InductorOptions) -> InductorOptions:
    return InductorOptions(**{name: getattr(message, name) for name in _INDUCTOR_OPTION_FIELDS if message.HasField(name)})


def inductor_to_pb(result: InductorResult) -> pb.InductorResult:
    return pb.InductorResult(
        status=_INDUCTOR_TO_PB[result.status], source=result.source, reason=result.reason, kernels=result.kernels,
        helpers=result.helpers, backend=result.backend, device=result.device, torch_version=result.torch_version,
        duration_s=result.duration_s,
    )


def inductor_from_pb(message: pb.InductorResult) -> InductorResult:
    return InductorResult(
        status=_INDUCTOR_FROM_PB.get(message.status, InductorStatus.INFRA_ERROR), source=message.source,
        reason=message.reason, kernels=message.kernels, helpers=list(message.helpers), backend=message.backend,
        device=message.device, torch_version=message.torch_version, duration_s=message.duration_s,
    )
