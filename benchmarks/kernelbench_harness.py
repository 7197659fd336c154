"""KernelBench's own harness, run from a copy kept outside this repository, each evaluation in a fresh process.

The copy is a folder passed as `--kernelbench-harness DIR`: KernelBench's `src/eval.py` unchanged, plus
`run_one.py`, which calls its `eval_kernel_against_ref` once, the way `scripts/eval_from_generations.py`
evaluates one sample on one GPU, and prints one JSON line (the folder's README.txt says where it came from
and what was shimmed). Like verifier_vs_regex.py's checker, KernelBench's code is never committed here.

`run_harness` starts `run_one.py` in a fresh Python, as eval_from_generations does (a new process per
evaluation), with a timeout and a fresh Triton cache (each evaluation compiles its kernels cold, as a new
sample would). A crash, a timeout or missing output becomes a `HarnessResult` with the reason, never an
exception. `run_many` runs several with bounded concurrency: 1 is how eval_from_generations runs on one
GPU (timing comparisons); more is for coverage runs, where only verdicts matter.
"""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path
from typing import Any, TypeVar

ENTRY = "run_one.py"
REQUIRED_FILES = (ENTRY, "src/eval.py")
DEFAULT_TIMEOUT_S = 180.0  # eval_from_generations' per-evaluation timeout
ERROR_TAIL_CHARS = 1500

T = TypeVar("T")
R = TypeVar("R")


class HarnessFolderError(ValueError):
    """The --kernelbench-harness folder is missing or is not the expected copy."""


@dataclasses.dataclass(frozen=True)
class HarnessResult:
    """One harness evaluation. `outcome`: "ran" (run_one.py printed its JSON line), "timeout", or "crash"
    (exited without a result); the KernelBench fields are meaningful only when it ran."""

    outcome: str
    compiled: bool = False
    correct: bool = False
    runtime_ms: float | None = None
    runtime_stats: dict[str, Any] = dataclasses.field(default_factory=dict)
    metadata: dict[str, Any] = dataclasses.field(default_factory=dict)
    error: str = ""
    process_s: float = 0.0  # the subprocess from start to exit, as the caller saw it
    eval_s: float | None = None  # eval_kernel_against_ref's own time, as run_one.py measured it
    peak_memory_mb: float | None = None  # torch's peak allocated GPU memory during the evaluation
    returncode: int | None = None

    @property
    def error_class(self) -> str:
        """Empty when correct; else oom, timeout, crash, compile_error, error (an exception outside the
        candidate, e.g. the reference failing), runtime_error or mismatch."""
        if self.correct:
            return ""
        if "out of memory" in (self.error + json.dumps(self.metadata, default=str)).lower():
            return "oom"
        if self.outcome != "ran":
            return self.outcome
        if not self.compiled:
            return "compile_error" if "compilation_error" in self.metadata else "error"
        if "runtime_error" in self.metadata:
            return "runtime_error"
        return "mismatch"

    def describe(self) -> str:
        """A short verdict for tables: correct, or the error class with its first line."""
        if self.correct:
            return "correct"
        return f"{self.error_class}: {first_line(self.reason())}"

    def reason(self) -> str:
        """The text that explains a failure: our error, else KernelBench's metadata."""
        if self.error:
            return self.error
        for key in ("cuda_error", "other_error", "compilation_error", "runtime_error", "correctness_issue",
                    "returned_none"):
            if key in self.metadata:
                detail = str(self.metadata[key])
                if key == "correctness_issue" and "max_difference" in self.metadata:
                    detail += f" (max difference per failed trial: {self.metadata['max_difference']})"
                return detail
        return ""

    def to_dict(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self), "error_class": self.error_class}


def first_line(text: str, limit: int = 160) -> str:
    line = next((line.strip() for line in text.splitlines() if line.strip()), "")
    return line if len(line) <= limit else line[: limit - 3] + "..."


def check_harness_dir(path: Path | str) -> Path:
    """The harness folder, resolved; a clear error if it is not there or lacks run_one.py / src/eval.py."""
    folder = Path(path).expanduser().resolve()
    if not folder.is_dir():
        raise HarnessFolderError(f"--kernelbench-harness: no such folder: {path} (a copy of KernelBench's src/eval.py "
                                 "with run_one.py; see benchmarks/kernelbench_harness.py)")
    missing = [name for name in REQUIRED_FILES if not (folder / name).is_file()]
    if missing:
        raise HarnessFolderError(f"--kernelbench-harness {path}: missing {', '.join(missing)}")
    return folder


def command(harness_dir: Path, reference_path: Path, candidate_path: Path, trials: int, perf_trials: int,
            perf: bool) -> list[str]:
    argv = [sys.executable, str(harness_dir / ENTRY), str(reference_path), str(candidate_path),
            "--trials", str(trials), "--perf-trials", str(perf_trials)]
    return argv if perf else argv + ["--no-perf"]


def run_harness(
    harness_dir: Path,
    reference: str,
    candidate: str,
    trials: int = 5,
    perf_trials: int = 100,
    perf: bool = True,
    timeout_s: float = DEFAULT_TIMEOUT_S,
) -> HarnessResult:
    """One evaluation of `candidate` against `reference` by KernelBench's harness, in a fresh process."""
    with tempfile.TemporaryDirectory(prefix="kb-harness-") as work:
        work_dir = Path(work)
        reference_path, candidate_path = work_dir / "reference.py", work_dir / "candidate.py"
        reference_path.write_text(reference)
        candidate_path.write_text(candidate)
        env = {**os.environ, "TRITON_CACHE_DIR": str(work_dir / "triton-cache"), "PYTHONUNBUFFERED": "1"}
        argv = command(harness_dir, reference_path, candidate_path, trials, perf_trials, perf)
        started = time.monotonic()
        process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, errors="replace",
                                   env=env, cwd=work_dir, start_new_session=True)
        try:
            stdout, stderr = process.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            _kill_group(process)
            _, stderr = process.communicate()
            return HarnessResult("timeout", error=f"no result within {timeout_s:.0f} s; stderr: {tail(stderr)}",
                                 process_s=time.monotonic() - started)
        finally:
            _kill_group(process)  # anything the evaluation left running in its session
        return parse_output(stdout, stderr, process.returncode, time.monotonic() - started)


def _kill_group(process: subprocess.Popen) -> None:
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def parse_output(stdout: str, stderr: str, returncode: int, process_s: float) -> HarnessResult:
    """run_one.py's JSON line (the last stdout line that is a JSON object with `compiled`), or a crash."""
    record = _last_record(stdout)
    if record is None:
        return HarnessResult("crash", error=f"{describe_exit(returncode)} without a result; stderr: {tail(stderr)}",
                             process_s=process_s, returncode=returncode)
    runtime = record.get("runtime")
    return HarnessResult(
        "ran",
        compiled=bool(record.get("compiled")),
        correct=bool(record.get("correctness")),
        runtime_ms=float(runtime) if isinstance(runtime, (int, float)) and runtime >= 0 else None,
        runtime_stats=dict(record.get("runtime_stats") or {}),
        metadata=dict(record.get("metadata") or {}),
        error="" if returncode == 0 else f"{describe_exit(returncode)} after printing its result",
        process_s=process_s,
        eval_s=record.get("wall_s"),
        peak_memory_mb=record.get("peak_allocated_mb"),
        returncode=returncode,
    )


def _last_record(stdout: str) -> dict[str, Any] | None:
    for line in reversed(stdout.splitlines()):
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(record, dict) and "compiled" in record:
            return record
    return None


def describe_exit(returncode: int | None) -> str:
    if returncode is None:
        return "still running"
    if returncode < 0:
        try:
            return f"killed by {signal.Signals(-returncode).name}"
        except ValueError:
            return f"killed by signal {-returncode}"
    return f"exit {returncode}"


def tail(text: str, limit: int = ERROR_TAIL_CHARS) -> str:
    text = (text or "").strip()
    return text if len(text) <= limit else "..." + text[-limit:]


def bounded_map(work: Callable[[T], R], items: Sequence[T], concurrency: int,
                deadline: float | None = None) -> Iterator[tuple[int, R]]:
    """(index, work(item)) as each finishes, at most `concurrency` running at once. An item not yet started
    when `deadline` (time.monotonic()) has passed is skipped: never run, never yielded."""
    skipped = object()

    def guarded(item: T):
        if deadline is not None and time.monotonic() > deadline:
            return skipped
        return work(item)

    with ThreadPoolExecutor(max_workers=max(1, concurrency), thread_name_prefix="bounded") as pool:
        futures = {pool.submit(guarded, item): index for index, item in enumerate(items)}
        for future in as_completed(futures):
            result = future.result()
            if result is not skipped:
                yield futures[future], result


def run_many(
    harness_dir: Path,
    pairs: Sequence[tuple[str, str]],
    concurrency: int = 1,
    deadline: float | None = None,
    **options: Any,
) -> Iterator[tuple[int, HarnessResult]]:
    """(index, result) for (reference, candidate) pairs, each in its own fresh process, at most
    `concurrency` at a time; pairs not started by `deadline` are skipped. `options` go to run_harness."""
    return bounded_map(lambda pair: run_harness(harness_dir, pair[0], pair[1], **options), pairs, concurrency,
                       deadline)


def require_cuda() -> None:
    """Exit with a clear message when no CUDA GPU is visible (the harness and the cuda sandbox need one)."""
    try:
        import torch
    except ImportError:
        raise SystemExit("error: torch is not installed (a GPU run needs torch with CUDA)") from None
    if not torch.cuda.is_available():
        raise SystemExit("error: no CUDA GPU visible (torch.cuda.is_available() is False); "
                         "on a CPU machine use the dry run")
