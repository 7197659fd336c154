"""Where the tests find the shared KernelBench copy, and what happens when it is missing.

A user's bare clone has no copy and no network: the tests that need real KernelBench problems skip,
with a reason that says how to get the data. CI promises the copy (`.ci/run` sets TRITONRL_SHARED_DIR,
Bazel passes it on, and CI=true says so too): there a missing copy fails those tests, so a broken CI
set-up can never pass by skipping them.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
MISSING = "KernelBench dataset not found"


def shared_dir() -> Path:
    """../shared beside the checkout (override with TRITONRL_SHARED_DIR, e.g. under Bazel)."""
    return Path(os.environ.get("TRITONRL_SHARED_DIR") or REPO_ROOT.parent / "shared")


def kernelbench_required() -> bool:
    """Whether a missing copy is a failure (CI) rather than a skip (anyone else)."""
    return bool(os.environ.get("TRITONRL_SHARED_DIR")) or os.environ.get("CI", "").lower() in ("1", "true", "yes")


def shared_kernelbench() -> Path:
    """The shared kernelbench.jsonl; skips the calling test without it, or fails it where it is required."""
    path = shared_dir() / "datasets" / "kernelbench.jsonl"
    if path.is_file():
        return path
    message = (f"{MISSING} at {path}: put a kernelbench.jsonl (rows of level, problem_id, name, code) there, "
               "or set TRITONRL_SHARED_DIR to a folder holding datasets/kernelbench.jsonl")
    if kernelbench_required():
        pytest.fail(message)
    pytest.skip(message)
