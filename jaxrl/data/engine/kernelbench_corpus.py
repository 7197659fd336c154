"""The benchmark the build is decontaminated against: every KernelBench problem, when it can be found.

A generated task that matches a KernelBench problem (the engine's `Decontaminator`: the same normalized
AST, or the same operator signature on the same kinds of inputs) is dropped, so training data never
holds a benchmark problem. When no copy can be found (`resolve_kernelbench`: the local copies, the cache,
a download), the build goes on but says so loudly: the corpus is `found=False`, and the card and summary
mark the build "not decontaminated". A path given explicitly must exist.
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
from pathlib import Path
from typing import Any

from jaxrl.data.engine.api import Engine
from jaxrl.data.kernelbench import KernelBenchUnavailable, Problem, load_problems, resolve_kernelbench

log = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class Corpus:
    """The KernelBench problems (empty when not found), where they were looked for, and a digest of
    their sources (None when not found) that goes into the build's fingerprint."""

    where: str
    problems: tuple[Problem, ...]
    found: bool

    @property
    def digest(self) -> str | None:
        if not self.found:
            return None
        h = hashlib.sha256()
        for problem in self.problems:
            h.update(f"{problem.key}\0{problem.code}\0".encode())
        return h.hexdigest()[:16]

    @property
    def levels(self) -> list[int]:
        return sorted({p.level for p in self.problems})


def load_corpus(source: str | None) -> Corpus:
    """Every level of KernelBench at `source` (None: found as `resolve_kernelbench` says, a download
    included; not found at all, the corpus is empty and the card says the data is not decontaminated)."""
    try:
        path = resolve_kernelbench(None if source is None else Path(source).expanduser())
    except KernelBenchUnavailable as exc:
        log.warning("no KernelBench copy to decontaminate against: %s", exc)
        return Corpus("(not found)", (), found=False)
    return Corpus(str(path), tuple(load_problems(path)), found=True)


class Decontamination:
    """`check(code)`: None, or {"kernelbench": problem key, "matcher": how it matched} for a benchmark twin."""

    def __init__(self, corpus: Corpus, engine: Engine):
        self.corpus = corpus
        self._matcher = engine.decontaminator({p.key: p.code for p in corpus.problems}) if corpus.found else None

    def check(self, code: str) -> dict[str, Any] | None:
        if self._matcher is None:
            return None
        hit = self._matcher.match(code)
        if hit is None:
            return None
        return {"kernelbench": str(hit.problem), "matcher": str(hit.matcher)}
