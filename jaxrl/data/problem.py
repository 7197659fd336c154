"""The KernelBench problem record, shared by the readers, the CPU-size transform and the loaders.

It lives in its own module so that those depend on it and not on each other.
"""

from __future__ import annotations

import ast
import dataclasses

_REQUIRED_NAMES = ("Model", "get_inputs", "get_init_inputs")


@dataclasses.dataclass(frozen=True)
class Problem:
    """One KernelBench task. `source` says where it was read from (file and line or path)."""

    level: int
    problem_id: int
    name: str
    code: str
    source: str = ""

    def __post_init__(self) -> None:
        where = f" ({self.source})" if self.source else ""
        for field in ("level", "problem_id"):
            value = getattr(self, field)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"problem {field} must be a positive int, got {value!r}{where}")
        if not isinstance(self.name, str) or not self.name:
            raise ValueError(f"problem name must be a non-empty string, got {self.name!r}{where}")
        if not isinstance(self.code, str) or not self.code.strip():
            raise ValueError(f"problem {self.key} has no code{where}")
        try:
            tree = ast.parse(self.code)
        except SyntaxError as exc:
            raise ValueError(f"problem {self.key} does not parse: {exc}{where}") from exc
        defined = {n.name for n in tree.body if isinstance(n, (ast.ClassDef, ast.FunctionDef))}
        missing = [name for name in _REQUIRED_NAMES if name not in defined]
        if missing:
            raise ValueError(f"problem {self.key} does not define {', '.join(missing)}{where}")

    @property
    def key(self) -> str:
        """Stable identifier used in sample records and metrics, e.g. "L1/19"."""
        return problem_key(self.level, self.problem_id)


def problem_key(level: int, problem_id: int) -> str:
    return f"L{level}/{problem_id}"
