"""KernelBench metrics from per-sample sandbox verdicts, with several samples per problem.

Input: one `SampleRecord` per (problem, sample): the problem key, its level (KernelBench) or family
(data-engine tasks), the sample index and the sandbox's JSON fields (`status`, `valid`, `compiled`,
`correct`, `speedup`). Output, per level (or per family, `group_by="family"`) and over all problems
(a problem without a level or family counts only in "all"):

* Per-sample properties, each a yes/no per sample:
    - valid:    passed the format and anti-cheat layers (`valid`);
    - compiled: the candidate compiled and ran (`compiled`);
    - correct:  status `ok`, i.e. valid AND matched the reference. A hack whose outputs match is
                `cheat`, never correct, so these numbers cannot be inflated by cheating;
    - fast_p:   correct AND speedup > p, for p = 1 and 2 (KernelBench's fast_p).
* `@k` rates for every requested k, with the unbiased estimator of Chen et al. (2021): for a problem
  with n samples of which c have the property, P(at least one of k random samples has it) =
  1 - C(n-c, k) / C(n, k); averaged over problems. `@1` is the per-sample rate (c / n averaged over
  problems); `correct@k` is the usual pass@k. Each problem weighs the same, whatever its n. A rate
  @k is None (shown "-") when some problem in the group has fewer than k samples.
* mean speedup: the geometric mean of `speedup` over correct samples that were timed. Speedup is a
  ratio, so the geometric mean is the right average (2x faster and 2x slower average to 1x) and
  one implausible outlier cannot dominate it. It says how fast the correct kernels are; how often
  a sample is both correct and fast is what fast_p says.
* When a group has correct samples but none was timed (e.g. the Triton interpreter on CPU),
  fast_p and the mean speedup are None rather than 0. A correct sample without a speedup in a
  timed run counts as not fast.
* `infra_error` samples (the sandbox failed, not the candidate) count as failures everywhere, so
  infrastructure trouble can only lower the numbers; their count is reported beside them. So do
  `reference_error` samples (the task's reference is broken), whose count gets a column when there are any.
"""

from __future__ import annotations

import dataclasses
import math
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from sandbox_service.results import Status

PROPERTIES = ("valid", "compiled", "correct", "fast_1", "fast_2")
FAST_THRESHOLDS = {"fast_1": 1.0, "fast_2": 2.0}
_STATUSES = {s.value for s in Status}


@dataclasses.dataclass(frozen=True)
class SampleRecord:
    """One evaluated sample: which problem, which sample, and the sandbox's verdict."""

    problem: str
    level: int | None
    sample: int
    status: str
    valid: bool
    compiled: bool
    correct: bool
    speedup: float | None = None
    family: str | None = None

    def __post_init__(self) -> None:
        where = f"sample {self.sample} of {self.problem!r}"
        if not isinstance(self.problem, str) or not self.problem:
            raise ValueError(f"problem key must be a non-empty string, got {self.problem!r}")
        if self.level is not None and (isinstance(self.level, bool) or not isinstance(self.level, int) or self.level < 1):
            raise ValueError(f"{where}: level must be a positive int or None, got {self.level!r}")
        if self.family is not None and (not isinstance(self.family, str) or not self.family):
            raise ValueError(f"{where}: family must be a non-empty string or None, got {self.family!r}")
        if isinstance(self.sample, bool) or not isinstance(self.sample, int) or self.sample < 0:
            raise ValueError(f"{where}: sample index must be an int >= 0, got {self.sample!r}")
        status = self.status.value if isinstance(self.status, Status) else self.status
        if status not in _STATUSES:
            raise ValueError(f"{where}: unknown status {status!r} (expected one of {sorted(_STATUSES)})")
        object.__setattr__(self, "status", status)
        for name in ("valid", "compiled", "correct"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"{where}: {name} must be a bool, got {getattr(self, name)!r}")
        if (status == Status.OK.value) != (self.valid and self.correct):
            raise ValueError(
                f"{where}: inconsistent verdict: status {status!r} with valid={self.valid}, correct={self.correct} "
                "(status 'ok' means valid and correct)"
            )
        if self.speedup is not None:
            if isinstance(self.speedup, bool) or not isinstance(self.speedup, (int, float)):
                raise ValueError(f"{where}: speedup must be a number or None, got {self.speedup!r}")
            if not math.isfinite(self.speedup) or self.speedup <= 0:
                raise ValueError(f"{where}: speedup must be finite and > 0, got {self.speedup!r}")
            object.__setattr__(self, "speedup", float(self.speedup))

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> SampleRecord:
        """From a sandbox `--json` object plus `problem`, `level` and `sample` (and optionally `family`);
        other keys are ignored."""
        missing = [k for k in ("problem", "level", "sample", "status", "valid", "correct") if k not in data]
        if missing:
            raise ValueError(f"sample record is missing {', '.join(missing)}: {dict(data)!r:.200}")
        return cls(
            problem=data["problem"],
            level=data["level"],
            sample=data["sample"],
            status=data["status"],
            valid=data["valid"],
            compiled=data.get("compiled", False),
            correct=data["correct"],
            speedup=data.get("speedup"),
            family=data.get("family"),
        )

    @property
    def is_correct(self) -> bool:
        return self.status == Status.OK.value

    def has(self, prop: str) -> bool:
        """Whether the sample has one of PROPERTIES (a missing speedup is not fast)."""
        if prop in FAST_THRESHOLDS:
            return self.is_correct and self.speedup is not None and self.speedup > FAST_THRESHOLDS[prop]
        if prop == "correct":
            return self.is_correct
        return bool(getattr(self, prop))


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased estimate of P(at least one of k samples, drawn without replacement from n, is good).

    1 - C(n-c, k) / C(n, k), as the product 1 - prod_{i=n-c+1}^{n} (1 - k/i), which never forms the
    large binomials (Chen et al. 2021).
    """
    if not 0 <= c <= n or not 1 <= k <= n:
        raise ValueError(f"pass_at_k needs 0 <= c <= n and 1 <= k <= n, got n={n}, c={c}, k={k}")
    if n - c < k:
        return 1.0
    return 1.0 - math.prod(1.0 - k / i for i in range(n - c + 1, n + 1))


@dataclasses.dataclass(frozen=True)
class GroupMetrics:
    """Metrics of one group of problems (a level or a family, or all of them)."""

    name: str
    problems: int
    samples: int
    infra_errors: int
    reference_errors: int
    # k -> property -> rate in [0, 1], or None when undefined (see the module docstring).
    rates: dict[int, dict[str, float | None]]
    mean_speedup: float | None
    timed_samples: int

    def rate(self, prop: str, k: int = 1) -> float | None:
        return self.rates[k][prop]

    def to_dict(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["rates"] = {str(k): dict(v) for k, v in self.rates.items()}
        return data


@dataclasses.dataclass(frozen=True)
class Metrics:
    """Per-level (or per-family) groups in order, then the group of all problems ("all")."""

    ks: tuple[int, ...]
    groups: tuple[GroupMetrics, ...]

    def group(self, name: str) -> GroupMetrics:
        for group in self.groups:
            if group.name == name:
                return group
        raise KeyError(f"no metrics group {name!r}; have {[g.name for g in self.groups]}")

    def to_dict(self) -> dict[str, Any]:
        return {"ks": list(self.ks), "groups": [g.to_dict() for g in self.groups]}

    def table(self, markdown: bool = False) -> str:
        return format_table(self, markdown=markdown)


GROUP_BY = ("level", "family")


def compute_metrics(records: Iterable[SampleRecord | Mapping[str, Any]], ks: Sequence[int] = (1,),
                    group_by: str = "level") -> Metrics:
    """Metrics per level (groups "level N") or per family (groups named by the family), and overall;
    `ks` are the k of the @k rates (1 is always included)."""
    if group_by not in GROUP_BY:
        raise ValueError(f"group_by must be one of {GROUP_BY}, got {group_by!r}")
    ks = tuple(sorted({1, *ks}))
    if any(isinstance(k, bool) or not isinstance(k, int) or k < 1 for k in ks):
        raise ValueError(f"k values must be positive ints, got {list(ks)}")
    by_problem: dict[str, list[SampleRecord]] = defaultdict(list)
    seen: set[tuple[str, int]] = set()
    keys: dict[str, Any] = {}
    for item in records:
        record = item if isinstance(item, SampleRecord) else SampleRecord.from_dict(item)
        if (record.problem, record.sample) in seen:
            raise ValueError(f"duplicate record: sample {record.sample} of {record.problem!r}")
        seen.add((record.problem, record.sample))
        key = getattr(record, group_by)
        if keys.setdefault(record.problem, key) != key:
            raise ValueError(f"problem {record.problem!r} appears with {group_by}s {keys[record.problem]} and {key}")
        by_problem[record.problem].append(record)
    if not by_problem:
        raise ValueError("no sample records to compute metrics from")
    groups = [
        _group(f"level {key}" if group_by == "level" else key, {p: s for p, s in by_problem.items() if keys[p] == key}, ks)
        for key in sorted({k for k in keys.values() if k is not None})
    ]
    groups.append(_group("all", by_problem, ks))
    return Metrics(ks, tuple(groups))


def _group(name: str, by_problem: dict[str, list[SampleRecord]], ks: tuple[int, ...]) -> GroupMetrics:
    samples = [s for group in by_problem.values() for s in group]
    correct = [s for s in samples if s.is_correct]
    timed = [s.speedup for s in correct if s.speedup is not None]
    untimed = bool(correct) and not timed
    fewest = min(len(group) for group in by_problem.values())
    rates: dict[int, dict[str, float | None]] = {}
    for k in ks:
        rates[k] = {}
        for prop in PROPERTIES:
            if k > fewest or (untimed and prop in FAST_THRESHOLDS):
                rates[k][prop] = None
                continue
            per_problem = [pass_at_k(len(group), sum(s.has(prop) for s in group), k) for group in by_problem.values()]
            rates[k][prop] = sum(per_problem) / len(per_problem)
    return GroupMetrics(
        name=name,
        problems=len(by_problem),
        samples=len(samples),
        infra_errors=sum(s.status == Status.INFRA_ERROR.value for s in samples),
        reference_errors=sum(s.status == Status.REFERENCE_ERROR.value for s in samples),
        rates=rates,
        mean_speedup=math.exp(sum(math.log(x) for x in timed) / len(timed)) if timed else None,
        timed_samples=len(timed),
    )


def format_table(metrics: Metrics, markdown: bool = False) -> str:
    """One row per group: per-sample rates (%), the geometric-mean speedup, and correct/fast @k for k > 1."""
    header = ["group", "problems", "samples", "valid", "compiled", "correct", "fast_1", "fast_2", "speedup"]
    for k in metrics.ks[1:]:
        header += [f"correct@{k}", f"fast_1@{k}", f"fast_2@{k}"]
    header.append("infra_err")
    broken_references = any(g.reference_errors for g in metrics.groups)
    if broken_references:
        header.append("ref_err")
    rows = []
    for g in metrics.groups:
        row = [g.name, str(g.problems), str(g.samples)]
        row += [_percent(g.rate(p)) for p in PROPERTIES]
        row.append("-" if g.mean_speedup is None else f"{g.mean_speedup:.2f}x")
        for k in metrics.ks[1:]:
            row += [_percent(g.rate(p, k)) for p in ("correct", "fast_1", "fast_2")]
        row.append(str(g.infra_errors))
        if broken_references:
            row.append(str(g.reference_errors))
        rows.append(row)
    if markdown:
        rule = "|" + "|".join("---" if i == 0 else "---:" for i in range(len(header))) + "|"
        lines = ["| " + " | ".join(header) + " |", rule]
        lines += ["| " + " | ".join(row) + " |" for row in rows]
        return "\n".join(lines)
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]

    def line(cells: list[str]) -> str:
        return "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths)))

    return "\n".join([line(header), "  ".join("-" * w for w in widths), *map(line, rows)])


def _percent(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f}%"
