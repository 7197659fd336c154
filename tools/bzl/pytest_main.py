"""Bazel's entry point for a py_test made by pytest_suite: run pytest on one file.

Runs in the test's runfiles tree (the workspace root there), so pyproject.toml's pytest settings
and tests/conftest.py apply as in a plain `pytest` run. Extra arguments (`--test_arg`) go to pytest.
"""

from __future__ import annotations

import os
import sys

import pytest


def main(argv: list[str]) -> int:
    if not argv:
        print("usage: pytest_main.py TEST_FILE [PYTEST_ARGS...]", file=sys.stderr)
        return 2
    test_file, extra = argv[0], argv[1:]
    if not os.path.isfile(test_file):
        print(f"pytest_main.py: no test file {test_file!r} in {os.getcwd()}", file=sys.stderr)
        return 2
    # Bazel gives each test a private, writable TEST_TMPDIR but leaves TMPDIR at /tmp and HOME unset:
    # keep temporary files, and the caches Triton and JAX write under HOME, in that directory.
    tmp = os.environ.get("TEST_TMPDIR")
    if tmp:
        os.environ["TMPDIR"] = tmp
        os.environ.setdefault("HOME", tmp)
    args = [test_file, "-p", "no:cacheprovider"]
    xml = os.environ.get("XML_OUTPUT_FILE")
    if xml:
        args.append(f"--junitxml={xml}")
    status = int(pytest.main(args + extra))
    if status == pytest.ExitCode.NO_TESTS_COLLECTED:
        # Kept as a failure: a test file that yields no test is a mistake, not a pass.
        print(f"pytest_main.py: no test collected from {test_file}", file=sys.stderr)
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
