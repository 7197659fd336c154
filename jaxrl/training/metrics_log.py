"""Per-step metrics to <run dir>/metrics.jsonl and TensorBoard, for any trainer (SFT, GRPO).

Each `log(step, metrics)` call writes one JSON line `{"step": N, "time": unix seconds, name: value,
...}` and one TensorBoard scalar per name (names like `train/loss`, `eval/loss` group the plots).
Values may be Python numbers, numpy or JAX scalars; non-finite values are written as null in JSON
(JSON has no NaN) and as they are to TensorBoard.

A resumed run passes `start_step`: lines of later steps, written by the interrupted run after its
last checkpoint, are removed (the resumed run writes them again) and TensorBoard purges its events
of those steps. Only process 0 writes; the others get a logger that does nothing.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

METRICS_FILE = "metrics.jsonl"
TENSORBOARD_DIR = "tensorboard"


class MetricsLogger:
    def __init__(self, run_dir: str | Path, *, start_step: int = 0, tensorboard: bool = True, enabled: bool = True):
        self.run_dir = Path(run_dir)
        self.path = self.run_dir / METRICS_FILE
        self.enabled = enabled
        self._file = None
        self._writer = None
        if not enabled:
            return
        self.run_dir.mkdir(parents=True, exist_ok=True)
        drop_lines_after(self.path, start_step)
        self._file = open(self.path, "a", encoding="utf-8")
        if tensorboard:
            from tensorboardX import SummaryWriter

            self._writer = SummaryWriter(str(self.run_dir / TENSORBOARD_DIR), purge_step=start_step + 1)

    def log(self, step: int, metrics: Mapping[str, Any]) -> dict[str, float | int | None]:
        """Writes the metrics of `step`; returns them as plain Python numbers."""
        values = {name: to_number(value, name) for name, value in metrics.items()}
        if not self.enabled:
            return values
        record = {"step": int(step), "time": round(time.time(), 3)}
        record.update({k: (v if v is None or math.isfinite(v) else None) for k, v in values.items()})
        self._file.write(json.dumps(record) + "\n")
        self._file.flush()
        if self._writer is not None:
            for name, value in values.items():
                self._writer.add_scalar(name, value, int(step))
        return values

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None
        if self._writer is not None:
            self._writer.close()
            self._writer = None

    def __enter__(self) -> MetricsLogger:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def to_number(value: Any, name: str = "value") -> float | int:
    """A scalar (Python, numpy or JAX, on any device) as a Python int or float."""
    array = np.asarray(value)
    if array.size != 1 or array.dtype == bool or array.dtype.kind in "OUS":
        raise ValueError(f"metric {name!r} must be a numeric scalar, got {value!r:.80}")
    scalar = array.reshape(())
    return int(scalar) if np.issubdtype(array.dtype, np.integer) else float(scalar)


def read_metrics(run_dir: str | Path) -> list[dict[str, Any]]:
    """The records of a run's metrics.jsonl, in order."""
    return read_jsonl(Path(run_dir) / METRICS_FILE)


def read_jsonl(path: str | Path) -> list[dict[str, Any]]:
    """The records of a JSON-lines file, in order."""
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def drop_lines_after(path: Path, step: int) -> None:
    """Removes the lines of a per-step JSONL file whose `step` is after `step`: a resumed run writes
    them again (the interrupted run wrote them after its last checkpoint)."""
    if not path.exists():
        return
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    kept = [line for line in lines if line.strip() and json.loads(line)["step"] <= step]
    if len(kept) != len(lines):
        path.write_text("".join(kept), encoding="utf-8")
