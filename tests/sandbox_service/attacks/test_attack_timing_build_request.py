"""A build request during timing (CUDA lanes): the candidate's Triton may compile a kernel signature it first meets
while timed (a shape or a constexpr that only the timing inputs take), and a hostile candidate can ask for one on
purpose. `_Evaluation._time` passes it on as `self._build(message, deadline)`, without the request's kind, so the
call raises TypeError, which `_finalized` turns into `infra_error`: a candidate that expects a poor verdict from its
timing (a slow kernel, `work-skipped-when-timed`) can have it masked by the trainer instead.

BREACH (found by reading: this machine has no GPU, so the timing conversation runs against stand-ins for the lane,
the candidate process and its message stream; the code under test is evaluation._Evaluation._time itself)."""

from __future__ import annotations

import contextlib
from pathlib import Path
from types import SimpleNamespace

from sandbox_service.evaluation import _Evaluation, _Finish
from sandbox_service.options import EvalOptions
from sandbox_service.results import EvalResult, Status


class _Lane:
    backend = "cuda"

    def __init__(self, built: Path):
        self.built = built
        self.empty_batch_s = {}  # no task's empty batch measured yet: the first timed order is the calibration

    @contextlib.contextmanager
    def gpu_alone(self, keep=None, judge=None, drain=False):
        yield

    def build(self, message):
        return {"type": "built", "path": str(self.built), "key": "k", "sha256": "0" * 64}


class _Child:
    def __init__(self):
        self.sent = []

    def send(self, message):
        self.sent.append(message)


class _Messages:
    """A candidate that asks for a build while timed, then fails its timing run."""

    def __init__(self):
        self.queue = [
            {"type": "build_request", "name": "launcher", "source": "int x;", "library_dirs": [], "include_dirs": [],
             "libraries": []},
            {"type": "runtime_error", "phase": "timing", "error": "a failed timing run"},
        ]

    def next(self, deadline, cancel):
        return self.queue.pop(0)


class _Deadline:
    def extend(self, seconds):
        pass


def _evaluation(tmp_path: Path) -> _Evaluation:
    built = tmp_path / "builds" / "launcher.so"
    built.parent.mkdir()
    built.write_bytes(b"a launcher")
    evaluation = _Evaluation.__new__(_Evaluation)
    evaluation.folder = tmp_path / "candidate"  # the candidate's own folder, where its copy of the build goes
    evaluation.folder.mkdir()
    evaluation.options = EvalOptions(trials=2, timeout_s=20)
    evaluation.lane = _Lane(built)
    evaluation.cancel = None
    evaluation.result = EvalResult(status=Status.INFRA_ERROR, backend="cuda", trials=2)
    evaluation.child = _Child()
    evaluation.seen = {"inputs_ready": {}, "outputs_done": {}}
    evaluation.builds = {"build_request": 0, "ptxas_request": 0}
    evaluation.build_s = 0.0
    evaluation.problem = SimpleNamespace(key="task")
    evaluation.judge = SimpleNamespace(prepared={"output_bytes": 4096}, service=None,
                                       reference_due=lambda method, fresh_inputs=False: False)  # the task's output size (the empty batch's copy)
    evaluation.timing_checks = 1
    evaluation.remeasure_empty = False
    return evaluation


def test_a_build_request_while_timed_is_not_infra_error(tmp_path):
    evaluation = _evaluation(tmp_path)
    try:
        evaluation._time(_Messages(), _Deadline(), {"remote_build": True, "backend": "cuda"})
    except _Finish as finish:
        status, error = finish.status, finish.error
    except Exception as exc:  # noqa: BLE001 - what _finalized would report as infra_error
        status, error = Status.INFRA_ERROR, f"sandbox error: {type(exc).__name__}: {exc}"
    else:
        status, error = evaluation.result.status, evaluation.result.error
    assert status != Status.INFRA_ERROR, f"a build request during timing made the evaluation infra_error: {error}"
    assert status == Status.RUNTIME_ERROR, (status, error)
