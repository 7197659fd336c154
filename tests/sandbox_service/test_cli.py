"""`python -m sandbox_service check` keeps the JSON contract of docs/DESIGN.md and its exit codes."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time

from sandbox_service.cli import EXAMPLES

CONTRACT_FIELDS = {
    "status", "correct", "valid", "violations", "trials", "trials_passed", "max_abs_error",
    "ref_time_us", "candidate_time_us", "speedup", "backend", "device",
}
STATUSES = {"ok", "incorrect", "cheat", "format_error", "compile_error", "runtime_error", "timeout", "infra_error",
            "reference_error"}


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


def test_a_broken_reference_exits_2_as_reference_error_not_the_candidates_fault(tmp_path):
    reference = (EXAMPLES / "scaled_add_reference.py").read_text().replace("def get_inputs(", "def no_inputs(")
    (tmp_path / "reference.py").write_text(reference)
    run = check(str(tmp_path / "reference.py"), str(EXAMPLES / "scaled_add_correct.py"), "--json", "--trials", "1")
    data = json.loads(run.stdout)
    assert (run.returncode, data["status"], data["correct"]) == (2, "reference_error", False)
    assert "get_inputs" in data["error"]
    assert run.stderr.strip().splitlines()[-1].startswith(f"error: {tmp_path / 'reference.py'} cannot be judged against")


def test_an_unreachable_target_exits_2_within_seconds():
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    started = time.monotonic()
    run = check(str(EXAMPLES / "scaled_add_reference.py"), str(EXAMPLES / "scaled_add_correct.py"),
                "--target", f"127.0.0.1:{port}", "--json")
    assert run.returncode == 2 and time.monotonic() - started < 30
    assert run.stderr.strip() == (f"error: cannot reach the sandbox server(s) 127.0.0.1:{port} within 5 s (UNAVAILABLE); "
                                  "start one with `python -m sandbox_service serve --port PORT` or fix --target")
    assert run.stdout == ""


def test_a_backend_this_machine_lacks_exits_2_with_one_line():
    import torch

    if torch.cuda.is_available():
        return  # the machine has the backend: nothing to refuse
    run = check(str(EXAMPLES / "scaled_add_reference.py"), str(EXAMPLES / "scaled_add_correct.py"), "--backend", "cuda")
    assert run.returncode == 2
    assert run.stderr.strip().splitlines() == ["error: --backend cuda was asked for, but no CUDA GPU is visible (use "
                                               "--backend interpreter or auto, or run on a machine with a GPU)"]
