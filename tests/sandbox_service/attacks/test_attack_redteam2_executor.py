"""Red team 2: the executor's leaner replay and chunked timing inputs (executor/replay.py, executor/runner.py,
interface/program.py). Each test asserts the secure behaviour, so each FAILS while its flaw is there.

Timing runs only on CUDA, so the timing findings are shown on the CPU with the executor's own code
(`runner.run`, `TimingInputs`, `_time_checked`, `Replay`, the interpreter running the program's kernels) and
only `timing.time_cuda` replaced by a stand-in that makes the same calls in the same order (before_run(0),
the warm-up calls, then before_run(i) and a call per timed run) without CUDA events.

- FINDING timing-checked-run-told-apart: the timed runs' inputs are made a chunk at a time, the first chunk
  before the `time` order; the order's secret `checked_run` then makes that run's inputs again
  (`replace_seed`) while the whole chunk is alive. When the checked run lies in the first chunk (always, when a
  set of inputs is at most TIMING_INPUT_BYTES / timing_runs: 2.6 MB, e.g. every RL-sized task), its inputs
  are the one set allocated after all the others, off the regular stride at which the allocator laid the
  chunk out. A kernel reads its pointer argument's address (`x.to(tl.int64)`), keeps the last one in a
  buffer of the model, and does the work only when the address is off the stride: the checked run is always
  computed, every other timed run skipped. The judge's timing check passes and the timed median is that of an
  empty kernel: `ok` with an unearned speedup. Before the change every run's inputs were made just before it
  after the last run's were freed, so every run, the checked one included, got the same addresses (the same
  kernel, run against the parent commit's runner, does the work in 100/100 timed runs). Shown here with the CPU
  allocator (glibc, whose strides are noisier than the CUDA caching allocator's); not run on a GPU. A kernel
  that is unsure computes, so the allocator's noise costs the attack speed, never the check.
- FINDING timing-checked-outputs-repaired-later: the checked run's outputs are kept (writable, in the
  context the candidate's kernels run in) until the judge takes them after the whole batch, and with the chunked
  inputs that run's inputs stay alive after it too. Kept outputs also give the run away after the fact: the next
  run's `empty_like` cannot reuse their block, so the output address moves once, right after the checked run. A
  kernel can skip every timed run and, in the run after the move, compute the checked run's answer into its
  outputs: one run's work in 100, whatever run is checked and whatever chunk it lies in. (Keeping the outputs
  predates the change; before it the checked run's inputs were freed and overwritten by the next run's, so the
  attack also had to copy every run's inputs.)
- FINDING timing-inputs-alive-during-warmup: for the same reason, while the three untimed warm-up calls run,
  every timed run's inputs (the checked run's too) already lie in device memory, where the candidate's kernels
  can read them by address (a Triton kernel's pointer arithmetic reaches any address of its context). Work for
  every timed run can then be done in the warm-up, outside the CUDA-event figure, and each timed run served from
  that cache whatever run is checked; only the outside floor (half the server's clock) still sees it. Before the
  change run i's inputs did not exist until just before run i.
- FINDING timing-calibration-not-the-same-batch: the empty batch the server subtracts (calibrate) makes all its
  inputs inside the batch, while the timed batch's first chunk was made before the server's clock started; for
  RL-sized tasks that is every timed run's inputs, so `batch - empty` is short by the making of ~100 input sets
  and the outside floor (the check of the executor's CUDA-event figure against the server's clock) no longer
  binds anything.
- FINDING launch-names-not-refused: the new check refuses kernel keyword arguments named like the 5 launch
  options the program may carry and grid/warmup, but Triton's launch takes every field of the backend's
  options as a keyword (`ir_override`, `extern_libs`, `debug`, `launch_pdl`, `launch_cooperative_grid`,
  `arch`, `ptx_options`, `default_dot_input_precision`, ...). A program's kwargs reach `kernel.run`, and on a
  GPU JITFunction.run hands them to `backend.parse_options`: `ir_override` makes Triton compile the IR/PTX
  file it names instead of the kernel kernels.py checked, `extern_libs` links the bitcode file it names into
  the kernel.
"""

from __future__ import annotations

import ast
import types
import weakref
from pathlib import Path

import pytest
import torch

from attack_support import FAST, RELU, candidate, dedicated_lane
from sandbox_service import timing
from sandbox_service.evaluation import evaluate
from sandbox_service.executor import runner
from sandbox_service.executor.replay import Replay
from sandbox_service.executor.runner import TimingInputs
from sandbox_service.interface.program import ProgramError, check_program
from sandbox_service.lane import EXECUTOR_DESIGN
from sandbox_service.options import Policy
from sandbox_service.results import Status
from sandbox_service.worker import harness
from timing_support import time_on_the_cpu

META = {"shape": [16, 256], "stride": [256, 1], "dtype": "float32"}
STATE_META = {"shape": [16], "stride": [1], "dtype": "int64"}

# The attacker's kernels, as the tracer records them from candidates/redteam2_skips_unchecked_timed_runs.py (plain
# Triton: they pass kernels.py). `watch` runs first in every forward: it reads the address of this forward's
# input, compares its step from the last forward's with the step the allocator has been taking, and writes `skip`
# into the model's state buffer (a buffer: it lives across forwards). It arms only after the warm-up's signature
# (the same input three calls in a row), learns the stride from two equal steps in a row, and skips a run whose
# step is that stride give or take 512 bytes (the allocator's padding). The checked run's inputs cannot lie one
# stride after the last run's: that run's inputs are alive there. `relu_1d` does the work only when `skip` is 0.
SKIPPING = candidate("redteam2_skips_unchecked_timed_runs")
FIXING_UP = candidate("redteam2_fixes_up_the_checked_run")
TL = {"tl": {"module": "triton.language"}}


def _kernels(source: str) -> dict:
    """The program's kernels, as the tracer records a candidate's @triton.jit functions (source without the
    decorator, the globals they name)."""
    kernels = {}
    for node in ast.parse(source).body:
        if isinstance(node, ast.FunctionDef) and node.decorator_list:
            node.decorator_list = []
            kernels[node.name] = {"source": ast.unparse(node) + "\n", "globals": TL}
    return kernels


def _launch(kernel: str, args: list, grid: int, **kwargs) -> dict:
    return {"launch": kernel, "args": args, "configs": [{"grid": [grid], "kwargs": kwargs, "options": {}}]}


X, STATE, OUT = {"ref": 0}, {"ref": 1}, {"ref": 2}
CHECKS = 3  # this file's timing orders check three runs (timing_order draws how many, about five)
CHECK_SEEDS = [424242, 424243, 424244]  # the server's seeds for the checks (timing_order draws new ones)
SAMPLE_SEED = 616161  # the server's seed of the elements the checks compare (timing_order draws a new one)
TRIAL_SEEDS = [515151, 515152, 515153]  # the server's seeds for the trials (fresh_trial_seeds draws new ones)
EMPTY_LIKE = {"op": "aten.empty_like.default", "args": [X], "kwargs": {}, "out": OUT}


def _program(source: str, steps: list) -> dict:
    return {"kernels": _kernels(source), "constants": [{"ref": 1, "meta": STATE_META}],
            "sets": [{"inputs": [{"tensor": {"ref": 0, "meta": META}}], "constants": [1], "steps": steps,
                      "outputs": [OUT]}]}


def skipping_program() -> dict:
    """What the tracer records for candidates/redteam2_skips_unchecked_timed_runs.py (a 16-int64 `state` buffer)."""
    return _program(SKIPPING, [_launch("watch", [X, STATE], 1), EMPTY_LIKE,
                               _launch("relu_1d", [X, OUT, 4096, STATE], 4, BLOCK=1024)])


class _Orders:
    """The server's side of the executor's control channel: the orders it sends after outputs_done."""

    def __init__(self, orders: list[dict]):
        self.orders = list(orders)

    def receive(self, timeout=None) -> dict:
        return self.orders.pop(0)


@pytest.fixture
def interpreter(monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    monkeypatch.setattr(timing, "time_cuda", time_on_the_cpu)


def _executor_job(tmp_path: Path, program: dict, state: torch.Tensor, trials: int) -> dict:
    from safetensors.torch import save_file

    folder = tmp_path / f"job-{len(list(tmp_path.iterdir()))}"
    (folder / "outputs").mkdir(parents=True)
    (folder / "reference.py").write_text(RELU)
    save_file({"1": state}, str(folder / "constants.safetensors"))
    return {"type": "job", "backend": "interpreter", "reference_path": str(folder / "reference.py"), "input_sets": [],
            "outputs_dir": str(folder / "outputs"), "seed": 42, "trials": trials, "policy": Policy.STRICT.value,
            "warmup_runs": 3, "timing_runs": 100, "ipc_min_bytes": None, "remote_build": False,
            "memory_limit_mb": 4096, "file_limit_mb": 65536, "cpu_limit_s": 600, "program": program,
            "folder": str(folder), "constants_path": str(folder / "constants.safetensors"), "trial_key": "lane-secret",
            "trial_seeds": [TRIAL_SEEDS[:trials]], "max_timing_checks": CHECKS}


def _run_executor_job(tmp_path: Path, monkeypatch, checked_run: int, program: dict) -> dict:
    """One executor job, as runner.run does it for the server: trials, then a `time` order with the secret
    checked runs (`checked_run` and two more, as many as the server checks). Returns what the judge would see
    (each trial's outputs, the checked runs' outputs) and whether each timed run's outputs were right."""
    trials = 2
    job = _executor_job(tmp_path, program, torch.zeros(16, dtype=torch.int64), trials)
    handed: dict[tuple[int, int], list[torch.Tensor]] = {}
    real_hand_over = runner.hand_over

    def hand_over(job_, emit, control, tensors, set_index, trial, fingerprint):
        handed[(set_index, trial)] = [t.clone() for t in tensors]
        real_hand_over(job_, emit, control, tensors, set_index, trial, fingerprint)

    monkeypatch.setattr(runner, "hand_over", hand_over)
    timed_runs: list[bool] = []  # per replay during the timing: were its outputs relu(inputs)?
    in_timing = {"on": False}
    real_run = Replay.run

    def run(self, inputs, poison=False):
        outputs = real_run(self, inputs, poison)
        if in_timing["on"]:
            timed_runs.append(torch.equal(outputs[0], torch.relu(inputs[0])))
        return outputs

    monkeypatch.setattr(Replay, "run", run)
    real_time_checked = runner._time_checked

    def time_checked(*args, **kwargs):
        in_timing["on"] = True
        try:
            return real_time_checked(*args, **kwargs)
        finally:
            in_timing["on"] = False

    monkeypatch.setattr(runner, "_time_checked", time_checked)
    said: list[tuple[str, dict]] = []
    runner.run(job, lambda kind, **fields: said.append((kind, fields)),
               _Orders([{"type": "time", "run_seed": 7, "checked_runs": _checked(checked_run),
                         "check_seeds": CHECK_SEEDS, "sample_seed": SAMPLE_SEED}, {"type": "stop"}]))
    runner.forget_job()
    kinds = [k for k, _ in said]
    assert "timing" in kinds and "outputs_done" in kinds, said[-1][1].get("error", said[-3:])
    module = harness.load_problem_sets(job["reference_path"], [], job["seed"])[0][1]
    seeds = job["trial_seeds"][0] + CHECK_SEEDS  # the trials', the checks'
    expected = [torch.relu(harness.trial_inputs(module, seed, torch.device("cpu"))[0]) for seed in seeds]
    for check, run in enumerate(_checked(checked_run)):  # a timing check hands over the sample the judge names
        sample_seed = harness.call_sample_seed(SAMPLE_SEED, job["warmup_runs"] + run)
        full = expected[trials + check].reshape(-1)
        expected[trials + check] = full[harness.sample_indices([full.numel()], sample_seed)[0]]
    judged = [torch.allclose(handed[(0, t)][0], expected[t])
              for t in range(trials + CHECKS)]  # the trials, then the timing checks (the server's seeds)
    return {"trials_pass": all(judged[:trials]), "check_passes": all(judged[trials:]), "timed_runs": timed_runs[3:]}


def _checked(run: int) -> list[int]:
    """The secret checked runs of one order: `run` and others spread over the batch."""
    return [run, (run + 31) % 100, (run + 67) % 100]


def _skips_and_passes(tmp_path: Path, monkeypatch, source: str, program: dict, checked_runs: tuple) -> list[str]:
    """For each secret checked run: does the candidate pass its trials and the timing check while the work was
    done in fewer than half of the timed runs? (An empty list when the screens refuse the candidate.)"""
    with dedicated_lane(design=EXECUTOR_DESIGN) as lane:  # the candidate itself passes every screen and its trials
        screened = evaluate(RELU, source, FAST, lane)
    if screened.status != Status.OK:
        return []  # refused before it is timed: the attack does not get this far
    succeeded = []
    for checked_run in checked_runs:
        seen = _run_executor_job(tmp_path, monkeypatch, checked_run, program)
        timed = seen["timed_runs"]
        assert len(timed) == 100
        worked = sum(timed)
        if seen["trials_pass"] and seen["check_passes"] and worked < len(timed) // 2:
            succeeded.append(f"checked run {checked_run}: the trials and the timing check pass, the work was done "
                             f"in {worked}/100 timed runs (runs {[i for i, w in enumerate(timed) if w][:12]})")
    return succeeded


# FINDING timing-checked-run-told-apart
def test_a_kernel_cannot_skip_the_timed_runs_and_still_pass_the_timing_check(interpreter, tmp_path, monkeypatch):
    tries = (7, 42, 73, 99)
    succeeded = _skips_and_passes(tmp_path, monkeypatch, SKIPPING, skipping_program(), tries)
    # A kernel that tells the checked runs apart passes every try. On the CPU the allocator's noise makes this
    # one compute about half the runs at random, and a random skipper passes the checks with probability
    # (share computed)^CHECKS (about 1 in 10 here): so some try may pass, but not every one.
    assert len(succeeded) < len(tries), ("a kernel that tells the checked runs apart by its inputs' address "
                                         "skips the others and passes: " + "; ".join(succeeded))


# FINDING timing-checked-outputs-repaired-later
def test_the_checked_run_s_outputs_cannot_be_changed_by_the_runs_after_it(monkeypatch):
    """The GPU attack (candidates/redteam2_fixes_up_the_checked_run.py): skip every timed run; the checked run's
    outputs are kept until the judge takes them after the batch, so the caching allocator gives the next run's
    `empty_like` another block (the output address moves once, right after the checked run); that run's kernel
    then computes the checked run's answer from its inputs (alive: made a chunk ahead) into its outputs. On the
    CPU the interpreter's own allocations blur the address signal, so this shows the two facts it needs without
    an allocator: the checked run's outputs (and inputs) are alive while later timed runs' kernels run, and what
    those kernels write into them is what the judge gets."""
    with dedicated_lane(design=EXECUTOR_DESIGN) as lane:
        screened = evaluate(RELU, FIXING_UP, FAST, lane)
    if screened.status != Status.OK:
        return  # refused before it is timed: the attack does not get this far

    class Reference:
        @staticmethod
        def get_inputs():
            return [torch.randn(16, 256)]

    job = {"timing_runs": 100, "warmup_runs": 3, "trial_key": "k", "max_timing_checks": 1, "trials": 2}
    all_seeds = harness.trial_seeds(42, 3, "k")
    timed = runner.timing_inputs(job, Reference, 11, torch.device("cpu"))
    checked_run, calls = 42, []
    earlier: list[tuple[weakref.ref, weakref.ref]] = []  # every forward's (inputs, outputs), held weakly

    def run(inputs):  # a forward that skips its work (its outputs: garbage) ...
        out = torch.full_like(inputs[0], float("nan"))
        for inputs_ref, outputs_ref in earlier:  # ... and repairs any earlier run's outputs still alive
            earlier_inputs, earlier_outputs = inputs_ref(), outputs_ref()
            if earlier_inputs is not None and earlier_outputs is not None and earlier_outputs is not out:
                earlier_outputs.copy_(torch.relu(earlier_inputs))  # the kernel's work, done one run late
                calls.append(len(earlier))
        earlier.append((weakref.ref(inputs[0]), weakref.ref(out)))
        return [out]

    handed = {}
    monkeypatch.setattr(timing, "time_cuda", time_on_the_cpu)
    monkeypatch.setattr(runner, "hand_over", lambda job_, emit, control, tensors, set_index, trial, fingerprint:
                        handed.update(outputs=[t.clone() for t in tensors]))
    runner._time_checked(job, lambda kind, **fields: None, None, types.SimpleNamespace(run=run), timed,
                         [(checked_run, all_seeds[-1])], calibrate=False)
    expected = torch.relu(harness.trial_inputs(Reference, all_seeds[-1], torch.device("cpu"))[0])
    repaired = torch.equal(handed["outputs"][0], expected)
    assert not repaired, (f"every timed forward skipped its work, yet the checked run's outputs the judge gets are "
                          f"right: a later run wrote them (repairs made in {len(calls)} later forwards, from the "
                          f"checked run's inputs, still alive)")


# FINDING timing-checked-run-told-apart (the cause, without the allocator: the order of making)
def test_the_checked_run_s_inputs_are_made_in_turn_with_the_other_runs():
    """The checked run's inputs must come about like every other run's (here: made in run order), or the
    kernel can tell them apart. Each get_inputs call is numbered; the run-to-call map must be increasing."""

    class Reference:
        made = 0

        @classmethod
        def get_inputs(cls):
            cls.made += 1
            return [torch.full((16, 256), float(cls.made))]

    inputs = TimingInputs(Reference, harness.trial_seeds(5, 100, "k"), torch.device("cpu"))
    inputs.replace_seed(42, 12345)  # the order's secret checked run
    order = [int(inputs(i)[0][0, 0].item()) for i in range(100)]
    out_of_turn = [i for i in range(1, 100) if order[i] < order[i - 1]]
    assert not out_of_turn, (f"run 42's inputs were made by get_inputs call {order[42]}, after run 99's "
                             f"(call {order[99]}): the checked run is the one set made out of turn")


# FINDING timing-inputs-alive-during-warmup
def test_no_timed_run_s_inputs_exist_while_the_untimed_warm_up_runs(monkeypatch):
    """The warm-up calls are candidate work outside the CUDA-event figure: no other timed run's inputs may be
    reachable (alive) then, or a kernel can do their work there."""

    class Reference:
        @staticmethod
        def get_inputs():
            return [torch.randn(16, 256)]

    job = {"timing_runs": 100, "warmup_runs": 3, "trial_key": "k", "max_timing_checks": 1, "trials": 2}
    all_seeds = harness.trial_seeds(42, 3, "k")
    timed = runner.timing_inputs(job, Reference, 11, torch.device("cpu"))
    phase = {"warm-up": False}
    alive_in_warm_up: set[int] = set()

    def time_cuda(fn, *, warmup, runs, method, before_run=None, lead_us=None):
        before_run(0)
        phase["warm-up"] = True
        for _ in range(warmup):
            fn()
        phase["warm-up"] = False
        for i in range(runs):
            before_run(i)
            fn()
        return timing.summarize([1.0] * runs, method)

    def run(inputs):
        if phase["warm-up"]:
            alive_in_warm_up.update(index for index, made in timed.ready.items() if made is not inputs)
        return [inputs[0]]

    monkeypatch.setattr(timing, "time_cuda", time_cuda)
    monkeypatch.setattr(runner, "hand_over", lambda *args, **kwargs: None)
    runner._time_checked(job, lambda kind, **fields: None, None, types.SimpleNamespace(run=run), timed,
                         [(42, all_seeds[-1])], calibrate=False)
    assert not alive_in_warm_up, (f"during the untimed warm-up the inputs of {len(alive_in_warm_up)} other timed runs "
                                  f"were alive (the checked run 42's among them: {42 in alive_in_warm_up})")


# FINDING timing-calibration-not-the-same-batch
def test_the_empty_batch_makes_no_more_inputs_than_the_timed_batch(interpreter, monkeypatch):
    """runner.run prepares the timed batch's first chunk before the server's `time` order; the server subtracts
    the `calibrate` batch from the timed one on its own clock. The two must do the same untimed work."""

    class Reference:
        made = 0

        @classmethod
        def get_inputs(cls):
            cls.made += 1
            return [torch.randn(16, 256)]

    job = {"timing_runs": 100, "warmup_runs": 3, "trial_key": "k", "max_timing_checks": 1, "trials": 2}
    all_seeds = harness.trial_seeds(42, 3, "k")
    fake_replay = types.SimpleNamespace(run=lambda inputs: [inputs[0]])
    monkeypatch.setattr(runner, "hand_over", lambda *args, **kwargs: None)
    emit = lambda kind, **fields: None  # noqa: E731
    timed = runner.timing_inputs(job, Reference, 11, torch.device("cpu"))
    Reference.made = 0
    runner._time_checked(job, emit, None, fake_replay, runner.timing_inputs(job, Reference, 12,
                                                                            torch.device("cpu")),
                         [(0, 1)], calibrate=True)
    in_empty_batch = Reference.made
    Reference.made = 0
    runner._time_checked(job, emit, None, fake_replay, timed, [(42, all_seeds[-1])], calibrate=False)
    in_timed_batch = Reference.made
    assert in_empty_batch <= in_timed_batch + 1, (
        f"the empty batch made {in_empty_batch} input sets inside the server's clock, the timed batch "
        f"{in_timed_batch}: the outside figure (batch - empty) is short by the making of "
        f"{in_empty_batch - in_timed_batch} sets")


# FINDING launch-names-not-refused
LAUNCH_NAMES = ["ir_override", "extern_libs", "debug", "launch_pdl", "launch_cooperative_grid", "arch",
                "ptx_options", "default_dot_input_precision", "sanitize_overflow", "supported_fp8_dtypes"]


def _program_with_kwarg(name: str, value) -> dict:
    program = skipping_program()
    program["sets"][0]["steps"][2]["configs"][0]["kwargs"][name] = value
    return program


def test_kernel_arguments_named_like_triton_s_launch_options_are_refused():
    accepted = []
    for name in LAUNCH_NAMES:
        try:
            check_program(_program_with_kwarg(name, "x"))
        except ProgramError:
            continue
        accepted.append(name)
    assert not accepted, f"check_program takes these names of Triton's launch as kernel arguments: {accepted}"


def test_a_program_s_kernel_arguments_never_become_triton_compile_options():
    """What the replay hands `kernel.run` for a launch whose kwargs name `ir_override` and `extern_libs`, and
    what Triton's CUDA backend (JITFunction.run -> backend.parse_options, the GPU path) makes of them."""
    program = _program_with_kwarg("ir_override", "/dev/shm/not-the-checked-kernel.ptx")
    program["sets"][0]["steps"][2]["configs"][0]["kwargs"]["extern_libs"] = [["libdevice", "/dev/shm/any.bc"]]
    try:
        check_program(program)  # passes today (the test above)
    except ProgramError:
        return
    seen: dict = {}

    class Kernel:
        @staticmethod
        def run(*args, **kwargs):
            seen.update(kwargs)

    kernels = types.SimpleNamespace(watch=Kernel, relu_1d=Kernel)
    replay = Replay(program["sets"][0], kernels, {1: torch.zeros(16, dtype=torch.int64)}, torch.device("cpu"),
                    Policy.STRICT)
    replay.run([torch.randn(16, 256)])
    from triton.backends.compiler import GPUTarget
    from triton.backends.nvidia.compiler import CUDABackend

    options = CUDABackend(GPUTarget("cuda", 90, 32)).parse_options(
        {k: v for k, v in seen.items() if k not in ("grid", "warmup")})
    assert options.ir_override is None and dict(options.extern_libs).get("libdevice", "").endswith("libdevice.10.bc"), (
        f"a launch's kwargs reach Triton's compile options: ir_override={options.ir_override!r}, "
        f"extern_libs={options.extern_libs!r} (the executor would compile the named file, not the checked kernel)")
