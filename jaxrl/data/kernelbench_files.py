"""Reading KernelBench problems from a JSONL file or a KernelBench-style folder, and selecting some.

Both layouts yield the same `Problem` records, sorted by (level, problem_id), so evaluation runs are
reproducible whichever copy of the benchmark is used. The folder layout is the KernelBench repository's
`KernelBench/` folder: `level<N>/<id>_<Name>.py`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path

from jaxrl.data.jsonl import read_objects
from jaxrl.data.problem import Problem

PROBLEM_FILE = re.compile(r"^(?P<id>\d+)_(?P<rest>.+)\.py$")
LEVEL_DIR = re.compile(r"^level(?P<level>\d+)$")


def read_problems(path: Path) -> list[Problem]:
    """Every problem of a JSONL file or a folder of `level<N>/<id>_<Name>.py` files."""
    return _read_folder(path) if path.is_dir() else _read_jsonl(path)


def select_problems(problems: list[Problem], levels: Iterable[int] | None, ids: Iterable[int] | None,
                    where: str) -> list[Problem]:
    """The problems of the given levels and ids (None = all); naming one that is absent is an error
    (`where` names the source in the message), never an empty result."""
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


def _read_jsonl(path: Path) -> list[Problem]:
    problems = []
    for row, where in read_objects(path):
        missing = [k for k in ("level", "problem_id", "name", "code") if k not in row]
        if missing:
            raise ValueError(f"{where}: missing field(s) {', '.join(missing)}")
        problems.append(Problem(row["level"], row["problem_id"], row["name"], row["code"], where))
    return _check_unique(problems, path)


def _read_folder(path: Path) -> list[Problem]:
    level_dirs = sorted(p for p in path.iterdir() if p.is_dir() and LEVEL_DIR.match(p.name))
    if not level_dirs:
        raise ValueError(f"{path}: no level<N>/ folders (expected KernelBench layout level1/1_Name.py)")
    problems = []
    for level_dir in level_dirs:
        level = int(LEVEL_DIR.match(level_dir.name)["level"])
        for file in sorted(level_dir.glob("*.py")):
            if file.name == "__init__.py":
                continue
            match = PROBLEM_FILE.match(file.name)
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
