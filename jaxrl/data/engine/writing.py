"""Atomic file writes: a file is either absent or complete, whenever the build is interrupted.

Each file is written under a temporary name in its own folder, flushed to disk, then renamed over the
final name (`os.replace` is atomic on POSIX). Temporary names start with `.tmp-`, so a folder can be
swept of those a killed process left behind.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

TMP_PREFIX = ".tmp-"


def jsonl_text(rows: Iterable[Mapping[str, Any]]) -> str:
    """One JSON object per line, keys in insertion order: the same rows always give the same bytes."""
    return "".join(json.dumps(row, ensure_ascii=False, allow_nan=False) + "\n" for row in rows)


def json_text(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False, allow_nan=False) + "\n"


def commit(files: Mapping[Path, str]) -> None:
    """Write every file under a temporary name first, then rename them all: an interruption while
    writing leaves none of them changed (and no temporary file)."""
    staged: list[tuple[Path, Path]] = []
    try:
        for path, text in files.items():
            staged.append((_write_temporary(path, text), path))
        for temporary, path in staged:
            os.replace(temporary, path)
    finally:
        for temporary, _ in staged:
            temporary.unlink(missing_ok=True)


def sweep_temporaries(folder: Path) -> int:
    """Delete temporary files an earlier, killed process left in `folder`; returns how many."""
    stale = list(folder.glob(f"{TMP_PREFIX}*")) if folder.is_dir() else []
    for path in stale:
        path.unlink(missing_ok=True)
    return len(stale)


def _write_temporary(path: Path, text: str) -> Path:
    temporary = path.with_name(f"{TMP_PREFIX}{os.getpid()}-{path.name}")
    try:
        with open(temporary, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
    return temporary
