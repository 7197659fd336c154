"""`python -m sandbox_service check` keeps the JSON contract of docs/DESIGN.md and its exit codes."""

from __future__ import annotations

import json
import subprocess
import sys

from sandbox_service.cli import EXAMPLES

CONTRACT_FIELDS = {
    "status", "correct", "valid", "violations", "trials", "trials_passed", "max_abs_error",
    "ref_time_us", "candidate_time_us", "speedup", "backend", "device",
}
STATUSES = {"ok", "incorrect", "cheat", "format_error", "compile_error", "runtime_error", "timeout", "infra_error"}


def check(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "sandbox_service", "check", *args], capture_output=True, text=True, timeout=300
    )


def test_json_contract_for_a_correct_and_a_cheating_candidate(tmp_path):
    for name, status, valid in [("scaled_add_correct", "ok", True), ("scaled_add_cheat", "cheat", False)]:
        run = check(str(EXAMPLES / "scaled_add_reference.py"), str(EXAMPLES / f"{name}.py"), "--json", "--trials", "2")
        assert run.returncode == 0, run.stderr
        lines = [line for line in run.stdout.splitlines() if line.strip()]
        assert len(lines) == 1, "stdout must hold exactly one JSON object"
        data = json.loads(lines[0])
        assert CONTRACT_FIELDS <= data.keys()
        assert data["status"] == status and data["status"] in STATUSES
        assert data["valid"] is valid and data["correct"] is (status == "ok")
        assert data["speedup"] is None and data["backend"] == "interpreter"
        for violation in data["violations"]:
            assert {"layer", "rule", "message"} <= violation.keys()
        if status == "cheat":
            assert data["violations"]


def test_a_completion_with_a_fenced_block_is_accepted(tmp_path):
    completion = tmp_path / "completion.md"
    completion.write_text("<think>fuse the three ops</think>\nHere it is:\n```python\n"
                          + (EXAMPLES / "scaled_add_correct.py").read_text() + "```\n")
    run = check(str(EXAMPLES / "scaled_add_reference.py"), str(completion), "--json", "--trials", "1")
    assert json.loads(run.stdout)["status"] == "ok"


def test_format_errors_still_exit_zero(tmp_path):
    candidate = tmp_path / "empty.md"
    candidate.write_text("I could not write the kernel.")
    run = check(str(EXAMPLES / "scaled_add_reference.py"), str(candidate), "--json")
    assert run.returncode == 0
    assert json.loads(run.stdout)["status"] == "format_error"


def test_usage_errors_exit_non_zero(tmp_path):
    run = check(str(tmp_path / "missing.py"), str(EXAMPLES / "scaled_add_correct.py"), "--json")
    assert run.returncode == 2 and "no such file" in run.stderr
    assert subprocess.run([sys.executable, "-m", "sandbox_service", "check"], capture_output=True).returncode == 2
