"""Options of one evaluation, with the protocol's defaults and validation in one place."""

from __future__ import annotations

import dataclasses
import enum
from typing import Any


class Policy(str, enum.Enum):
    """How much PyTorch may appear in `ModelNew.forward`.

    strict: every computation happens in Triton kernels; only allocation, views and layout are glue.
    relaxed: torch glue ops may run between kernels, but at least one kernel must do real work.
    """

    STRICT = "strict"
    RELAXED = "relaxed"


class CandidateFormat(str, enum.Enum):
    """How to read the candidate text.

    auto: a fenced code block if there is one (a model completion), else the text is code.
    completion: must contain a fenced Python block; the last one is the candidate.
    code: the text is the Python module itself.
    """

    AUTO = "auto"
    COMPLETION = "completion"
    CODE = "code"


# KernelBench's Triton results were published with atol = rtol = 1e-2 for every dtype.
DEFAULT_TOLERANCE = (1e-2, 1e-2)


@dataclasses.dataclass
class EvalOptions:
    trials: int = 5
    seed: int = 42
    # dtype name (e.g. "float32", "float16", "bfloat16") -> (atol, rtol); others use DEFAULT_TOLERANCE.
    tolerances: dict[str, tuple[float, float]] = dataclasses.field(default_factory=dict)
    time: bool = True
    warmup_runs: int = 3
    timing_runs: int = 100
    timeout_s: float = 180.0
    policy: Policy = Policy.STRICT
    candidate_format: CandidateFormat = CandidateFormat.AUTO
    # Speedups above this are reported with speedup_flagged = true for a human to look at.
    implausible_speedup: float = 10.0
    # For problems where a constant output would pass the tolerance (degenerate_reference), outputs must
    # also satisfy ||out - ref||_2 <= degenerate_rel_l2 * ||ref||_2, which no constant guess can.
    degenerate_rel_l2: float = 0.02
    memory_limit_mb: int = 16384
    max_source_bytes: int = 512 * 1024

    def __post_init__(self) -> None:
        self.policy = Policy(self.policy)
        self.candidate_format = CandidateFormat(self.candidate_format)
        self.tolerances = {str(k): (float(v[0]), float(v[1])) for k, v in self.tolerances.items()}
        problems = []
        if not 1 <= self.trials <= 100:
            problems.append(f"trials must be in [1, 100], got {self.trials}")
        if self.warmup_runs < 0 or not 1 <= self.timing_runs <= 10000:
            problems.append("warmup_runs must be >= 0 and timing_runs in [1, 10000]")
        if not 0 < self.timeout_s <= 3600:
            problems.append(f"timeout_s must be in (0, 3600], got {self.timeout_s}")
        if any(a < 0 or r < 0 for a, r in self.tolerances.values()):
            problems.append("tolerances must be non-negative")
        if self.implausible_speedup <= 1:
            problems.append("implausible_speedup must be > 1")
        if not 0 < self.degenerate_rel_l2 < 1:
            problems.append("degenerate_rel_l2 must be in (0, 1)")
        if self.memory_limit_mb < 256:
            problems.append("memory_limit_mb must be >= 256")
        if problems:
            raise ValueError("invalid EvalOptions: " + "; ".join(problems))

    def tolerance_for(self, dtype_name: str) -> tuple[float, float]:
        return self.tolerances.get(dtype_name, DEFAULT_TOLERANCE)

    def to_dict(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["policy"] = self.policy.value
        data["candidate_format"] = self.candidate_format.value
        data["tolerances"] = {k: list(v) for k, v in self.tolerances.items()}
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> EvalOptions:
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = set(data) - known
        if unknown:
            raise ValueError(f"unknown EvalOptions fields: {sorted(unknown)}")
        return cls(**data)


@dataclasses.dataclass(frozen=True)
class InputSet:
    """Another way to call the reference (TritonRL's input augmentation): Python source run in a copy of
    the reference module's namespace, defining `get_inputs()` and optionally `get_init_inputs()`. A
    candidate is correct only if it is correct on the reference's own inputs and on every input set, so a
    kernel that hard-codes the problem's shapes fails. Input sets are trusted text, like the reference."""

    name: str
    source: str

    def __post_init__(self) -> None:
        if not self.name or not self.name.replace("_", "").replace("-", "").isalnum() or len(self.name) > 64:
            raise ValueError(f"input set name must be a short identifier, got {self.name!r}")
        if "get_inputs" not in self.source:
            raise ValueError(f"input set {self.name!r} does not define get_inputs()")

    def to_dict(self) -> dict[str, str]:
        return {"name": self.name, "source": self.source}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> InputSet:
        return cls(str(data["name"]), str(data["source"]))


@dataclasses.dataclass
class ValidateOptions:
    """How a reference is validated against itself (the `Validate` call).

    seeds: how many input seeds it runs on (at least 2: outputs must change with the inputs); time:
    measure its time on the GPU; min_ref_time_us: below this the reference is too small to time
    meaningfully and the task is invalid (0 = no floor).
    """

    seeds: int = 3
    seed: int = 42
    time: bool = True
    min_ref_time_us: float = 0.0
    warmup_runs: int = 3
    timing_runs: int = 100
    timeout_s: float = 300.0
    memory_limit_mb: int = 16384
    tolerances: dict[str, tuple[float, float]] = dataclasses.field(default_factory=dict)

    def __post_init__(self) -> None:
        self.tolerances = {str(k): (float(v[0]), float(v[1])) for k, v in self.tolerances.items()}
        problems = []
        if not 2 <= self.seeds <= 20:
            problems.append(f"seeds must be in [2, 20], got {self.seeds}")
        if self.min_ref_time_us < 0:
            problems.append("min_ref_time_us must be >= 0")
        if self.warmup_runs < 0 or not 1 <= self.timing_runs <= 10000:
            problems.append("warmup_runs must be >= 0 and timing_runs in [1, 10000]")
        if not 0 < self.timeout_s <= 3600:
            problems.append(f"timeout_s must be in (0, 3600], got {self.timeout_s}")
        if self.memory_limit_mb < 256:
            problems.append("memory_limit_mb must be >= 256")
        if problems:
            raise ValueError("invalid ValidateOptions: " + "; ".join(problems))


@dataclasses.dataclass
class InductorOptions:
    """How a reference is compiled with TorchInductor (the `Inductor` call): the seed its model and inputs
    are built under, and the limits of the process that compiles it."""

    seed: int = 42
    timeout_s: float = 300.0
    memory_limit_mb: int = 16384

    def __post_init__(self) -> None:
        if not 0 < self.timeout_s <= 3600:
            raise ValueError(f"invalid InductorOptions: timeout_s must be in (0, 3600], got {self.timeout_s}")
        if self.memory_limit_mb < 256:
            raise ValueError("invalid InductorOptions: memory_limit_mb must be >= 256")
