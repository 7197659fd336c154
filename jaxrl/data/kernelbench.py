"""KernelBench problems as callers want them: found (`kernelbench_source`), read and selected
(`kernelbench_files`), optionally CPU-sized (`cpu_sized`).

A problem is a PyTorch module source defining `Model`, `get_inputs` and `get_init_inputs`; the
policy is asked for an equivalent `ModelNew`. This module sits on top of the others, which do not
import it.
"""

from __future__ import annotations

import os
from collections.abc import Iterable

from jaxrl.data.cpu_sized import cpu_sized_problems
from jaxrl.data.kernelbench_files import read_problems, select_problems
from jaxrl.data.kernelbench_source import REPO_ROOT, KernelBenchUnavailable, default_source, resolve_kernelbench
from jaxrl.data.problem import Problem, problem_key

__all__ = [
    "REPO_ROOT", "KernelBenchUnavailable", "Problem", "default_source", "load_problems", "problem_key",
    "resolve_kernelbench",
]


def load_problems(
    source: str | os.PathLike | None = None,
    levels: Iterable[int] | None = None,
    ids: Iterable[int] | None = None,
    cpu_sized: bool = False,
) -> list[Problem]:
    """Problems from a JSONL file or a folder of `level<N>/<id>_<name>.py` files.

    `source` None finds the benchmark as `resolve_kernelbench` says (which may download it, and raises
    `KernelBenchUnavailable` when it cannot). `levels` / `ids` select problems (None = all); asking for a
    level or id that is not there is an error rather than an empty result. `cpu_sized` shrinks each
    problem's sizes for the Triton interpreter and keeps only problems whose shrunk reference was
    validated (see `cpu_sized.py`).
    """
    path = resolve_kernelbench(source)
    problems = select_problems(read_problems(path), levels, ids, str(path))
    if cpu_sized:
        problems = cpu_sized_problems(problems, strict_ids=ids is not None)
    return problems
