"""The KernelBench harness runner: one fresh process per evaluation, its JSON line parsed, and a timeout,
a crash or a kill turned into a result with the reason (fake run_one.py scripts, no GPU)."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from benchmark_scripts import load_benchmark
from fake_harness import CRASH, ECHO, HANG, KILLED, make_harness

kb = load_benchmark("kernelbench_harness")

REFERENCE = "class Model: pass\n"
CANDIDATE = "class ModelNew: pass\n"


def test_the_json_line_is_parsed_among_noise_and_the_command_is_kernelbench_s(tmp_path):
    harness = make_harness(tmp_path, "echo", ECHO)
    result = kb.run_harness(harness, REFERENCE, CANDIDATE, trials=5, perf_trials=100, perf=True, timeout_s=60)
    assert result.outcome == "ran" and result.correct and result.compiled and result.returncode == 0
    assert result.runtime_ms == 1.25 and result.eval_s == 0.5 and result.peak_memory_mb == 123.0
    assert result.error_class == "" and result.describe() == "correct"
    assert result.metadata["argv"] == ["--trials", "5", "--perf-trials", "100"]
    assert result.metadata["candidate_has_model_new"]
    assert result.metadata["triton_cache"]  # a fresh Triton cache per evaluation
    untimed = kb.run_harness(harness, REFERENCE, CANDIDATE, trials=1, perf_trials=1, perf=False, timeout_s=60)
    assert untimed.metadata["argv"] == ["--trials", "1", "--perf-trials", "1", "--no-perf"]
    assert untimed.runtime_ms is None  # KernelBench's -1.0 means not timed


def test_failures_reported_by_the_harness_are_classified(tmp_path):
    harness = make_harness(tmp_path, "echo", ECHO)
    oom = kb.run_harness(harness, "FAIL_OOM", CANDIDATE, timeout_s=60)
    assert oom.outcome == "ran" and not oom.correct and oom.error_class == "oom"
    mismatch = kb.run_harness(harness, "FAIL_MISMATCH", CANDIDATE, timeout_s=60)
    assert mismatch.error_class == "mismatch"
    assert mismatch.describe() == "mismatch: Output mismatch (max difference per failed trial: ['0.500000'])"


def test_a_hanging_evaluation_times_out_and_its_process_group_is_killed(tmp_path):
    harness = make_harness(tmp_path, "hang", HANG)
    started = time.monotonic()
    result = kb.run_harness(harness, REFERENCE, CANDIDATE, timeout_s=3)
    assert time.monotonic() - started < 20
    assert result.outcome == "timeout" and result.error_class == "timeout" and not result.correct
    assert "no result within 3 s" in result.error
    grandchild = int((harness / "grandchild.pid").read_text())
    assert _gone(grandchild)


def _gone(pid: int, wait_s: float = 5.0) -> bool:
    """Not running (absent, or a zombie nobody has reaped yet)."""
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (FileNotFoundError, ProcessLookupError):
            return True
        if state in ("Z", "X"):
            return True
        time.sleep(0.1)
    return False


def test_a_crash_or_a_kill_becomes_a_result_with_the_reason(tmp_path):
    crash = kb.run_harness(make_harness(tmp_path, "crash", CRASH), REFERENCE, CANDIDATE, timeout_s=60)
    assert crash.outcome == "crash" and crash.returncode == 1 and crash.error_class == "crash"
    assert "exit 1 without a result" in crash.error and "boom in the harness" in crash.error
    killed = kb.run_harness(make_harness(tmp_path, "killed", KILLED), REFERENCE, CANDIDATE, timeout_s=60)
    assert killed.outcome == "crash" and "killed by SIGKILL" in killed.error


def test_parse_output_takes_the_last_result_line_and_notes_a_bad_exit():
    stdout = 'noise\n{"not": "a result"}\n{"compiled": true, "correctness": false, "metadata": ' \
             '{"correctness_issue": "Output mismatch"}}\n{broken\n'
    result = kb.parse_output(stdout, "", 0, 1.0)
    assert result.outcome == "ran" and result.compiled and result.error_class == "mismatch"
    compile_error = kb.parse_output('{"compiled": false, "metadata": {"compilation_error": "SyntaxError"}}', "", 0, 1.0)
    assert compile_error.error_class == "compile_error" and compile_error.describe() == "compile_error: SyntaxError"
    late_crash = kb.parse_output('{"compiled": true, "correctness": true}', "", -11, 1.0)
    assert late_crash.correct and late_crash.error == "killed by SIGSEGV after printing its result"
    nothing = kb.parse_output("plain text", "Traceback\nImportError: no torch", 1, 1.0)
    assert nothing.outcome == "crash" and "ImportError: no torch" in nothing.error


def test_the_harness_folder_is_checked_with_a_clear_error(tmp_path):
    with pytest.raises(kb.HarnessFolderError, match="no such folder"):
        kb.check_harness_dir(tmp_path / "absent")
    (tmp_path / "empty").mkdir()
    with pytest.raises(kb.HarnessFolderError, match="missing run_one.py, src/eval.py"):
        kb.check_harness_dir(tmp_path / "empty")
    assert kb.check_harness_dir(make_harness(tmp_path, "ok", ECHO)) == (tmp_path / "ok").resolve()


def test_run_many_bounds_concurrency_and_skips_work_after_the_deadline(tmp_path):
    running, peak, lock = [0], [0], threading.Lock()

    def work(item):
        with lock:
            running[0] += 1
            peak[0] = max(peak[0], running[0])
        time.sleep(0.05)
        with lock:
            running[0] -= 1
        return item * 2

    assert sorted(kb.bounded_map(work, [1, 2, 3, 4, 5], concurrency=2)) == [(0, 2), (1, 4), (2, 6), (3, 8), (4, 10)]
    assert peak[0] == 2
    assert list(kb.bounded_map(work, [1, 2], concurrency=2, deadline=time.monotonic() - 1)) == []
    harness = make_harness(tmp_path, "echo", ECHO)
    results = dict(kb.run_many(harness, [(REFERENCE, CANDIDATE), ("FAIL_OOM", CANDIDATE)], concurrency=2,
                               perf=False, timeout_s=60))
    assert results[0].correct and results[1].error_class == "oom"


def test_without_cuda_require_cuda_exits_with_a_clear_message():
    import torch

    if torch.cuda.is_available():
        pytest.skip("a GPU is visible here")
    with pytest.raises(SystemExit, match="no CUDA GPU visible"):
        kb.require_cuda()

