"""On a CUDA GPU (the device machine): timing, side streams, and a corrupted CUDA context.

Run there with `python -m pytest -m gpu tests/sandbox_service/test_gpu.py`.
"""

from __future__ import annotations

import dataclasses

import pytest

from sandbox_cases import CANCELLING, CORRECT, FIXTURES, HALF_REFERENCE, INCORRECT, REFERENCE, forging
from sandbox_service.evaluation import evaluate, run_isolated
from sandbox_service.options import EvalOptions
from sandbox_service.results import Status

pytestmark = pytest.mark.gpu
OPTIONS = EvalOptions(trials=3, timing_runs=50, timeout_s=120)


def gpu_fixture(name: str) -> str:
    return (FIXTURES / "gpu" / f"{name}.py").read_text()


def test_correct_kernel_is_timed_against_the_reference(gpu_lane):
    result = evaluate(REFERENCE, CORRECT, OPTIONS, gpu_lane)
    assert result.status == Status.OK, result.error
    assert result.device and "cpu" not in result.device
    assert result.candidate_timing.runs == 50 and result.ref_timing.runs == 50
    assert result.candidate_timing.method == "cuda_events"
    assert result.speedup == pytest.approx(result.ref_time_us / result.candidate_time_us)
    assert result.candidate_time_us > 0 and result.ref_time_us > 0


def test_incorrect_kernel_is_not_timed(gpu_lane):
    result = evaluate(REFERENCE, INCORRECT, OPTIONS, gpu_lane)
    assert result.status == Status.INCORRECT and result.speedup is None


def test_device_sync_timing_counts_side_stream_work():
    import torch

    from sandbox_service import timing

    side = torch.cuda.Stream()

    def hidden_work():
        with torch.cuda.stream(side):
            torch.cuda._sleep(20_000_000)  # tens of milliseconds on the side stream

    events = timing.time_cuda(hidden_work, warmup=1, runs=5, method=timing.CUDA_EVENTS)
    synced = timing.time_cuda(hidden_work, warmup=1, runs=5, method=timing.DEVICE_SYNC)
    assert synced.median_us > 20 * events.median_us
    assert synced.median_us > 1000


def test_a_lead_leaves_the_host_s_launch_latency_out_and_synchronised_timing_counts_it():
    """The host takes 30 us before it launches a tiny kernel: KernelBench's synchronised runs (the default) count
    those 30 us, runs with a 250 us lead before each start event time the kernel alone."""
    import time

    import torch

    from sandbox_service import timing

    x = torch.zeros(1024, device="cuda")

    def slow_launch():
        until = time.perf_counter() + 30e-6
        while time.perf_counter() < until:
            pass
        x.add_(1.0)

    queued = timing.time_cuda(slow_launch, warmup=3, runs=50, method=timing.CUDA_EVENTS, lead_us=250.0)
    synchronised = timing.time_cuda(slow_launch, warmup=3, runs=50, method=timing.CUDA_EVENTS)
    assert synchronised.median_us > 25.0
    assert queued.median_us < 15.0, (queued.median_us, synchronised.median_us)


def test_side_stream_trick_is_caught(gpu_lane):
    # The work escapes the current stream: flagged (by the static layer first), never reported as a speedup.
    assert evaluate(REFERENCE, gpu_fixture("side_stream"), OPTIONS, gpu_lane).status == Status.CHEAT
    result = run_isolated(REFERENCE, gpu_fixture("side_stream"), OPTIONS, gpu_lane)
    if gpu_lane.executor_design:
        # Without the static screen: the executor replays every launch on one stream and times all of it, so
        # the trick hides nothing: its time includes the side stream's work (timing_runs of it at least).
        assert result.status == Status.OK, (result.status, result.error)
        assert result.speedup < 1.0, (result.candidate_time_us, result.ref_time_us)  # the spin is timed too
        return
    # In-process design: the runtime layer sees the kernel still running after forward returned.
    assert result.status == Status.CHEAT, (result.status, result.error)
    assert "unjoined-side-stream" in {v.rule for v in result.violations}


def test_corrupted_cuda_context_costs_one_result(gpu_lane):
    result = evaluate(REFERENCE, gpu_fixture("illegal_address"), dataclasses.replace(OPTIONS, timeout_s=60), gpu_lane)
    assert result.status in (Status.RUNTIME_ERROR, Status.COMPILE_ERROR), (result.status, result.error)
    assert evaluate(REFERENCE, CORRECT, OPTIONS, gpu_lane).status == Status.OK


def test_a_cache_that_skips_kernels_when_timed_is_caught(gpu_lane):
    # Fresh inputs in every trial pass correctness; the timed calls repeat one input and hit the cache.
    result = run_isolated(REFERENCE, gpu_fixture("cache_by_input_object"), OPTIONS, gpu_lane)
    assert result.status == Status.CHEAT, (result.status, result.error)
    assert "work-skipped-when-timed" in {v.rule for v in result.violations}


# --- the process model on a GPU -------------------------------------------------------------------------------
def _judge_counts(lane, key_hint: str | None = None) -> dict:
    import collections

    total = collections.Counter()
    for judge in lane.judges:
        with judge.lock:
            total.update(judge.request({"op": "stats"}, 30)["counts"])
    return dict(total)


def test_the_reference_is_timed_for_a_group_s_first_candidate_only(gpu_lane, monkeypatch):
    from sandbox_service import evaluation

    monkeypatch.setattr(evaluation, "REFERENCE_REFRESH", 0.0)  # no secret remeasurement
    reference = REFERENCE.replace("return [0.5]", "return [0.75]")  # a task the judges have not seen
    before = _judge_counts(gpu_lane)
    first = evaluate(reference, CORRECT, OPTIONS, gpu_lane)
    second = evaluate(reference, CORRECT, OPTIONS, gpu_lane)
    after = _judge_counts(gpu_lane)
    assert first.status == second.status == Status.OK, (first.error, second.error)
    # Measured by one judge, twice (evaluation.REFERENCE_FIRST_TIMINGS); later timed batches (a batch the server's
    # clock saw as slow is timed again, evaluation._time) take the lane's figure without asking a judge.
    assert after.get("time_miss", 0) - before.get("time_miss", 0) == evaluation.REFERENCE_FIRST_TIMINGS
    assert after.get("time_hit", 0) - before.get("time_hit", 0) == 0
    assert first.ref_time_us == second.ref_time_us  # the lane's figure


LARGE = REFERENCE.replace("torch.randn(8, N), torch.randn(8, N)", "torch.randn(16384, N), torch.randn(16384, N)")


def test_large_outputs_go_to_the_judge_through_cuda_ipc(gpu_lane):
    from sandbox_service.lane import IPC_MIN_BYTES

    assert "16384" in LARGE and 16384 * 4096 * 4 >= IPC_MIN_BYTES  # 256 MB of outputs per trial
    result = evaluate(LARGE, CORRECT, OPTIONS, gpu_lane)
    assert result.status == Status.OK, result.error
    assert gpu_lane.ipc_min_bytes == IPC_MIN_BYTES  # no fall-back to files happened
    wrong = evaluate(LARGE, INCORRECT, OPTIONS, gpu_lane)
    assert wrong.status == Status.INCORRECT, wrong.error


# Another process on the GPU: takes all but `leave` bytes of what is free (again for a second: memory others give
# back meanwhile, as an executor emptying its cache after a job, is taken too), says so, and lets go when its
# stdin gives it a line or closes.
_FILLER = """
import sys, time, torch
leave, blocks = int(sys.argv[1]), []
for _ in range(5):
    free, _ = torch.cuda.mem_get_info()
    if free > leave:
        blocks.append(torch.empty(free - leave, dtype=torch.uint8, device="cuda"))
    time.sleep(0.2)
print("filled", flush=True)
sys.stdin.readline()
"""


def test_an_evaluation_waits_while_another_process_holds_the_gpu_s_memory_and_then_passes(gpu_lane, caplog):
    import logging
    import subprocess
    import sys
    import threading
    import time

    untimed = dataclasses.replace(OPTIONS, time=False)
    first = evaluate(LARGE, CORRECT, untimed, gpu_lane)  # the task prepared, an executor ready: none needs more
    assert first.status == Status.OK, first.error
    # The task's estimate (about 4.2 GB: 512 MB of inputs, 256 MB of outputs per trial) does not fit in 1 GiB.
    caplog.set_level(logging.INFO, logger="sandbox_service.worker.pool")
    caplog.clear()
    filler = subprocess.Popen([sys.executable, "-c", _FILLER, str(1 << 30)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert filler.stdout.readline().strip() == "filled"
        results = []
        evaluation = threading.Thread(target=lambda: results.append(evaluate(LARGE, CORRECT, untimed, gpu_lane)))
        evaluation.start()
        deadline = time.monotonic() + 30
        while not any("waiting for GPU memory" in r.getMessage() for r in caplog.records):
            assert time.monotonic() < deadline and evaluation.is_alive(), results and results[0].error
            time.sleep(0.1)
        time.sleep(2.0)
        filler.stdin.close()  # the other process lets go of the memory
        filler.wait(timeout=30)
        evaluation.join(timeout=60)
    finally:
        filler.kill()
    assert results and results[0].status == Status.OK, results and results[0].error
    memory = next(layer for layer in results[0].layers if layer.name == "memory")
    assert memory.duration_s >= 2.0 and "was free on the GPU" in memory.detail, memory


# Real IPC handles of the candidate's own tensor, with a storage that claims more than its allocation:
# torch trusts those numbers, and before the check a judge that read them hit an illegal address (its CUDA
# context lost, the judge restarted) or could be pointed at its own memory.
_LYING_IPC = """
from sandbox_service.worker.handover import _describe
keep = torch.randn(8, 4096, device="cuda")
item = _describe(keep)
{change}
_outputs(emit, job, {{"kind": "ipc", "tensors": [item]}})
control.receive()
"""


@pytest.mark.parametrize("change", [
    'item["meta"][2] = 1 << 34; item["shape"], item["stride"] = [1 << 32], [1]',
    'item["meta"][3] = 1 << 36; item["meta"][2] = 1 << 30; item["shape"], item["stride"] = [1 << 28], [1]',
], ids=["storage larger than its allocation", "storage offset past its allocation"])
def test_ipc_handles_that_overstate_their_storage_are_a_cheat_and_the_judge_stays(in_process_gpu_lane, change):
    """The in-process design's protocol: the candidate's own process hands its outputs over (under the executor
    design it has no GPU memory to describe; the executor makes every hand-over)."""
    restarts = sum(judge.restarts for judge in in_process_gpu_lane.judges)
    result = run_isolated(REFERENCE, forging(_LYING_IPC.format(change=change)), OPTIONS, in_process_gpu_lane)
    assert result.status == Status.CHEAT, (result.status, result.error)
    assert "malformed-handover" in [v.rule for v in result.violations]
    assert sum(judge.restarts for judge in in_process_gpu_lane.judges) == restarts
    assert evaluate(REFERENCE, CORRECT, OPTIONS, in_process_gpu_lane).status == Status.OK
    assert evaluate(REFERENCE, INCORRECT, OPTIONS, in_process_gpu_lane).status == Status.INCORRECT


def test_candidates_load_launchers_built_by_the_trusted_builder(gpu_lane):
    assert gpu_lane.builder is not None
    before = len(list((gpu_lane.work_root / "trusted-builds").glob("*/*.so")))
    assert evaluate(REFERENCE, CORRECT, OPTIONS, gpu_lane).status == Status.OK
    built = list((gpu_lane.work_root / "trusted-builds").glob("*/*.so"))
    assert built and len(built) >= before


def test_validation_times_the_reference_and_applies_the_floor(gpu_lane):
    from sandbox_service.options import ValidateOptions
    from sandbox_service.validation import validate

    ok = validate(LARGE, [], ValidateOptions(timing_runs=20), gpu_lane)
    assert ok.ok, ok.reason
    assert ok.ref_timing is not None and ok.ref_timing.median_us > 0 and ok.input_sets[0].peak_memory_mb > 0
    too_fast = validate(REFERENCE, [], ValidateOptions(timing_runs=20, min_ref_time_us=1e6), gpu_lane)
    assert too_fast.status.value == "invalid" and "below" in too_fast.reason


def test_a_validation_batch_times_each_reference_in_one_process_and_gives_its_memory_back(gpu_lane, monkeypatch):
    from sandbox_service.options import ValidateOptions
    from sandbox_service.validation import validate_batch

    spawned = []
    spawn = gpu_lane.spawn
    monkeypatch.setattr(gpu_lane, "spawn", lambda role: spawned.append(role) or spawn(role))
    broken = REFERENCE.replace("def forward(", "def forward_unused(")
    results = validate_batch([(LARGE, []), (broken, []), (REFERENCE, [])], ValidateOptions(timing_runs=20), gpu_lane)
    assert [r.status.value for r in results] == ["ok", "invalid", "ok"], [r.reason for r in results]
    assert results[0].ref_timing.median_us > results[2].ref_timing.median_us > 0
    assert spawned == ["validator"]
    assert gpu_lane.memory._used == 0


def test_a_16_bit_reference_that_disagrees_with_itself_in_float32_is_invalid_on_the_gpu(gpu_lane):
    from sandbox_service.options import ValidateOptions
    from sandbox_service.validation import validate_batch

    results = validate_batch([(HALF_REFERENCE.format(body=CANCELLING, dtype="float16"), []),
                              (HALF_REFERENCE.format(body="        return a * b + 1.0", dtype="float16"), [])],
                             ValidateOptions(timing_runs=20), gpu_lane)
    assert [r.status.value for r in results] == ["invalid", "ok"], [r.reason for r in results]
    assert "unstable in its precision" in results[0].reason and "computed in float32" in results[0].reason
    assert results[1].ref_timing is not None and gpu_lane.memory._used == 0


BREAKS_IN_FLOAT32 = """import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("table", torch.randn(1024))

    def forward(self, a):
        index = torch.ceil(a * 0 + 1023.1).long()  # 1023 in float16, 1024 (out of bounds) in float32
        return self.table[index] + a


def get_inputs():
    return [torch.randn(64, 256, dtype=torch.float16)]


def get_init_inputs():
    return []
"""


def test_a_reference_whose_float32_run_breaks_the_cuda_context_is_invalid_and_the_next_one_goes_on(gpu_lane):
    from sandbox_service.options import ValidateOptions
    from sandbox_service.validation import validate_batch

    results = validate_batch([(BREAKS_IN_FLOAT32, []), (REFERENCE, [])], ValidateOptions(timing_runs=20), gpu_lane)
    assert [r.status.value for r in results] == ["invalid", "ok"], [r.reason for r in results]
    assert "float32 run broke the CUDA context" in results[0].reason, results[0].reason


def _state(pid: int) -> str:
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()[0]


def test_candidate_processes_make_their_context_during_timing_and_launch_nothing_until_it_ends(gpu_lane):
    import threading
    import time

    from sandbox_service.lane import CANDIDATE
    from sandbox_service.worker.zygote import wait_ready

    spawned: list = []
    try:
        with gpu_lane.freezer.others_frozen(keep=None):  # as while another evaluation is timed
            thread = threading.Thread(target=lambda: spawned.append(gpu_lane.spawn(CANDIDATE)))
            thread.start()
            thread.join(120)
            assert spawned, "no CUDA context was made while the lane was frozen"
            child = spawned[0]
            deadline = time.monotonic() + 2.0
            while _state(child.pid) != "T" and time.monotonic() < deadline:  # SIGSTOP lands asynchronously
                time.sleep(0.01)
            assert _state(child.pid) == "T"  # frozen from its context on: its warm-up waits
            with pytest.raises(Exception, match="did not reach 'ready'"):
                wait_ready(child, 2.0)
        wait_ready(child, 120)  # thawed: it warms up and says ready
    finally:
        for child in spawned:
            child.close()


def test_a_jailed_cuda_candidate_compiles_through_the_builder_and_cannot_escape(gpu_lane):
    """On the GPU the candidate is sealed after its CUDA context: its kernel still compiles (ptxas and the
    launcher through the trusted builder) and runs, while starting a process kills it as a cheat."""
    fresh = CORRECT.replace("1024", "512")  # block and grid: a kernel no earlier test compiled
    result = run_isolated(REFERENCE, fresh, OPTIONS, gpu_lane)
    assert result.status == Status.OK and result.speedup is not None, result.error
    escape = CORRECT.replace("    def forward(self, a, b):\n",
                             "    def forward(self, a, b):\n        import ctypes\n        ctypes.CDLL(None).fork()\n", 1)
    caught = run_isolated(REFERENCE, escape, OPTIONS, gpu_lane)
    assert caught.status == Status.CHEAT and "jail-denied-syscall" in {v.rule for v in caught.violations}, caught
    assert evaluate(REFERENCE, CORRECT, OPTIONS, gpu_lane).status == Status.OK


def test_seeding_makes_the_same_inputs_as_torch_manual_seed():
    """harness.seed_everything's fast path (CUDA up) leaves every generator as torch.manual_seed does."""
    import torch

    from sandbox_service.worker import harness

    torch.cuda.init()
    torch.manual_seed(1234)
    expected = (torch.randn(64, device="cuda"), torch.randn(64))
    harness.seed_everything(1234)
    assert torch.equal(torch.randn(64, device="cuda"), expected[0]) and torch.equal(torch.randn(64), expected[1])


def test_the_l2_flush_writes_twice_the_gpu_s_l2():
    import torch

    from sandbox_service import timing

    size = torch.cuda.get_device_properties(torch.cuda.current_device()).L2_cache_size
    assert size > 0 and timing.l2_flush_bytes() == max(timing.MIN_L2_FLUSH_BYTES, 2 * size)


# A task big enough to time (two 128 MB inputs, about 130 us of memory traffic on an H100): the reward's
# speedup is trusted only if the same kernel, evaluated again, gets the same speedup.
BIG = REFERENCE.replace("torch.randn(8, N), torch.randn(8, N)", "torch.randn(8192, N), torch.randn(8192, N)")


@pytest.mark.xfail(strict=True, reason=(
    "open (issue 21): with KernelBench's synchronised runs six evaluations of this kernel got speedups 1.81-2.18 on "
    "an H100 at 93b7f8b (the executor's own median moved 172-207 us between evaluations); with queued runs and a "
    "250 us lead (timing.time_cuda's lead_us) the test passed on an H100 (b0ed72a), but that protocol is not the "
    "default: benchmarks/RESULTS.md, the timing protocols. The synchronised figure is the process's: on an idle "
    "H100 it moved 1.7-2.4x between fresh processes and 1.01x with a lead (experiments/timing_across_processes.py); "
    "in the server a lead (TRITONRL_TIMING_LEAD_US) made the executor's figure stable (1.02x) but the outside floor "
    "then binds on small kernels (ninth session)"))
def test_identical_kernels_get_speedups_within_ten_percent_of_each_other(gpu_lane):
    assert "8192, N" in BIG
    options = EvalOptions(trials=2, timeout_s=120)  # the protocol's timing: 3 warm-up calls, 100 runs
    results = [evaluate(BIG, CORRECT, options, gpu_lane) for _ in range(6)]
    assert all(r.status == Status.OK for r in results), [r.error for r in results]
    speedups = [r.speedup for r in results]
    print("\nthe same kernel evaluated 6 times: speedup, executor's median us, verdict's us, reference us, timing:")
    for r in results:
        detail = next(layer.detail for layer in r.layers if layer.name == "timing")
        print(f"  {r.speedup:.3f} {r.candidate_timing.median_us:.1f} {r.candidate_time_us:.1f} {r.ref_time_us:.1f} "
              f"{detail}")
    assert max(speedups) / min(speedups) <= 1.10, speedups
