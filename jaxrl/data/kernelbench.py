"""KernelBench problems: read them from the shared JSONL or from a KernelBench-style folder.

A problem is a PyTorch module source defining `Model`, `get_inputs` and `get_init_inputs`; the
policy is asked for an equivalent `ModelNew`. Both sources yield the same `Problem` records, sorted
by (level, problem_id), so evaluation runs are reproducible whichever copy of the benchmark is used.
"""

from __future__ import annotations

import ast
import dataclasses
import os
import re
from collections.abc import Iterable
from pathlib import Path

from jaxrl.data.jsonl import read_objects

REPO_ROOT = Path(__file__).resolve().parents[2]
_REQUIRED_NAMES = ("Model", "get_inputs", "get_init_inputs")
_FILE_NAME = re.compile(r"^(?P<id>\d+)_(?P<rest>.+)\.py$")
_LEVEL_DIR = re.compile(r"^level(?P<level>\d+)$")


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


def default_source() -> Path:
    """`$KERNELBENCH_JSONL`, else `$TRITONRL_SHARED_DIR/datasets/kernelbench.jsonl`, else ../shared beside the repo."""
    if os.environ.get("KERNELBENCH_JSONL"):
        return Path(os.environ["KERNELBENCH_JSONL"])
    shared = Path(os.environ.get("TRITONRL_SHARED_DIR", REPO_ROOT.parent / "shared"))
    return shared / "datasets" / "kernelbench.jsonl"


def load_problems(
    source: str | os.PathLike | None = None,
    levels: Iterable[int] | None = None,
    ids: Iterable[int] | None = None,
    cpu_sized: bool = False,
) -> list[Problem]:
    """Problems from a JSONL file or a folder of `level<N>/<id>_<name>.py` files.

    `levels` / `ids` select problems (None = all); asking for a level or id that is not there is an
    error rather than an empty result. `cpu_sized` shrinks each problem's sizes for the Triton
    interpreter and keeps only problems whose shrunk reference was validated (see `cpu_sized.py`).
    """
    path = Path(source) if source is not None else default_source()
    if not path.exists():
        hint = "" if source is not None else " (set KERNELBENCH_JSONL or pass a path)"
        raise FileNotFoundError(f"KernelBench source not found: {path}{hint}")
    problems = _read_folder(path) if path.is_dir() else _read_jsonl(path)
    problems = _select(problems, levels, ids, str(path))
    if cpu_sized:
        from jaxrl.data.cpu_sized import cpu_sized_problems

        problems = cpu_sized_problems(problems, strict_ids=ids is not None)
    return problems


def _read_jsonl(path: Path) -> list[Problem]:
    problems = []
    for row, where in read_objects(path):
        missing = [k for k in ("level", "problem_id", "name", "code") if k not in row]
        if missing:
            raise ValueError(f"{where}: missing field(s) {', '.join(missing)}")
        problems.append(Problem(row["level"], row["problem_id"], row["name"], row["code"], where))
    return _check_unique(problems, path)


def _read_folder(path: Path) -> list[Problem]:
    level_dirs = sorted(p for p in path.iterdir() if p.is_dir() and _LEVEL_DIR.match(p.name))
    if not level_dirs:
        raise ValueError(f"{path}: no level<N>/ folders (expected KernelBench layout level1/1_Name.py)")
    problems = []
    for level_dir in level_dirs:
        level = int(_LEVEL_DIR.match(level_dir.name)["level"])
        for file in sorted(level_dir.glob("*.py")):
            if file.name == "__init__.py":
                continue
            match = _FILE_NAME.match(file.name)
            if not match:
                raise ValueError(f"{file}: file name must look like <id>_<Name>.py")
            code = file.read_text(encoding="utf-8")
            problems.append(Problem(level, int(match["id"]), file.stem, code, str(file)))
    return _check_unique(problems, path)


def _check_unique(problems: list[Problem], path: Path) -> list[Problem]:
    seen: dict[str, Problem] = {}
    for problem in problems:
        if problem.key in seen:
            raise ValueError(f"{path}: duplicate problem {problem.key} ({seen[problem.key].source} and {problem.source})")
        seen[problem.key] = problem
    return sorted(problems, key=lambda p: (p.level, p.problem_id))


def _select(problems: list[Problem], levels: Iterable[int] | None, ids: Iterable[int] | None, where: str) -> list[Problem]:
    if levels is not None:
        wanted_levels = set(levels)
        present = {p.level for p in problems}
        absent = sorted(wanted_levels - present)
        if absent:
            raise ValueError(f"{where}: no problems for level(s) {absent}; levels present: {sorted(present)}")
        problems = [p for p in problems if p.level in wanted_levels]
    if ids is not None:
        wanted_ids = set(ids)
        absent = sorted(wanted_ids - {p.problem_id for p in problems})
        if absent:
            raise ValueError(f"{where}: problem id(s) {absent} not found in the selected level(s)")
        problems = [p for p in problems if p.problem_id in wanted_ids]
    return problems
