"""Run folders: every command writes into a fresh folder, and never into one that already exists."""

from __future__ import annotations

import time
from pathlib import Path

from jaxrl.config import Config

_MAX_SUFFIX = 1000


def create_run_dir(config: Config, command: str) -> Path:
    """Create and return the run folder: `eval.run_dir` when set, else `<run.output_root>/<run.name>`.

    Without `run.name` the folder is named `<command>-<YYYYmmdd-HHMMSS>`. When the folder exists,
    `-1`, `-2`, ... is appended: an earlier run's samples and metrics are never overwritten or mixed
    with new ones. `mkdir(exist_ok=False)` makes the choice safe against a concurrent run.
    """
    if config.eval.run_dir is not None and command == "eval":
        wanted = Path(config.eval.run_dir)
    else:
        name = config.run.name or f"{command}-{time.strftime('%Y%m%d-%H%M%S')}"
        wanted = Path(config.run.output_root) / name
    wanted.parent.mkdir(parents=True, exist_ok=True)
    for suffix in range(_MAX_SUFFIX):
        candidate = wanted if suffix == 0 else wanted.with_name(f"{wanted.name}-{suffix}")
        try:
            candidate.mkdir()
        except FileExistsError:
            continue
        return candidate
    raise FileExistsError(f"{wanted} and {_MAX_SUFFIX - 1} suffixed variants already exist; pick another run.name")
