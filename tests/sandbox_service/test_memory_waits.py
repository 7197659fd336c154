"""GPU memory that other processes hold is load, not a verdict: an evaluation waits until the GPU has its memory
free before its executor starts, a judge or an executor out of memory waits and tries again, and an evaluation
says so when the memory never comes back. An out-of-memory the candidate asks for itself stays its own.

On the CPU lane with stand-ins: a SharedGpu for NVML's reading of the device, and references that raise CUDA's
out-of-memory error in the judge or in the executor (standing in for an allocation refused there)."""

from __future__ import annotations

from collections.abc import Callable
import time
from pathlib import Path

import pytest

import sandbox_service.evaluation as evaluation
from sandbox_cases import CORRECT, FAST, REFERENCE
from sandbox_service.devices import DeviceMemory
from sandbox_service.evaluation import evaluate, out_of_memory_is_load
from sandbox_service.results import Status
from sandbox_service.worker import harness
from sandbox_service.worker.pool import FreeMemory

GB = 10**9
TOTAL = 80 * GB
ESTIMATE = 16 * GB  # the task's share, as lane.estimate_bytes would say on a GPU


def _reference_out_of_memory(marker, times: int) -> str:
    """REFERENCE whose forward raises CUDA's out-of-memory error the first `times` times (counted in a file).
    Only the judge runs the reference's forward."""
    forward = "    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:\n"
    assert forward in REFERENCE
    raise_first = (
        f"        import pathlib\n        marker = pathlib.Path({str(marker)!r})\n"
        "        count = int(marker.read_text()) if marker.exists() else 0\n"
        f"        if count < {times}:\n            marker.write_text(str(count + 1))\n"
        "            raise torch.cuda.OutOfMemoryError('CUDA out of memory. Tried to allocate 6.00 GiB')\n"
    )
    return REFERENCE.replace(forward, forward + raise_first)


def _reference_refused_in_the_executor(refused: Path, allocation: str, after_inputs_ready: bool = True) -> str:
    """REFERENCE whose get_inputs, in the executor, raises CUDA's out-of-memory error ("Tried to allocate
    `allocation`") while the file `refused` exists. The executor makes every trial's inputs once before it says
    they are ready (FAST.trials calls) and again for each trial, after the candidate's program was loaded:
    `after_inputs_ready` raises only then."""
    get_inputs = "def get_inputs():\n"
    assert get_inputs in REFERENCE
    first = FAST.trials if after_inputs_ready else 0
    raise_in_the_executor = (
        "    _calls.append(1)\n"
        f"    if open('/proc/self/comm').read().strip() == 'trl-executor' and len(_calls) > {first} \\\n"
        f"            and os.path.exists({str(refused)!r}):\n"
        f"        raise torch.cuda.OutOfMemoryError('CUDA out of memory. Tried to allocate {allocation}')\n"
    )
    return REFERENCE.replace(get_inputs, "import os\n_calls = []\n\n\n" + get_inputs + raise_in_the_executor)


class SharedGpu:
    """A stand-in for NVML's reading of a GPU that other processes share. While another process holds its
    memory, the file `refused` exists (the executor's stand-in reference is refused its allocations). Time is
    counted in readings, so that the tests do not race the machine."""

    def __init__(self, refused: Path):
        self.refused = refused
        self.free = TOTAL
        self.reads = 0
        self.held_until: int | None = None
        self.after: dict[int, Callable[[], None]] = {}  # actions after a given reading

    def read(self) -> DeviceMemory:
        self.reads += 1
        if self.held_until is not None and self.reads > self.held_until:
            self.give_back()
        memory = DeviceMemory(self.free, TOTAL)
        self.after.pop(self.reads, lambda: None)()
        return memory

    def hold(self, reads: int, leaves: int = 1 * GB) -> None:
        """Another process takes all but `leaves`, and gives it back after the next `reads` readings."""
        self.free, self.held_until = leaves, self.reads + reads
        self.refused.touch()

    def give_back(self) -> None:
        self.free, self.held_until = TOTAL, None
        self.refused.unlink(missing_ok=True)


@pytest.fixture
def short_waits(monkeypatch):
    monkeypatch.setattr(evaluation, "MEMORY_WAITS_S", (0.2, 0.2))


@pytest.fixture
def shared_gpu(cpu_lane, monkeypatch, short_waits, tmp_path):
    """The CPU lane as if on a shared GPU: its tasks' estimate is ESTIMATE, and it reads the device's free memory
    from a SharedGpu (margin 1 GB, polled every 50 ms, 30 s at most)."""
    gpu = SharedGpu(tmp_path / "refused")
    free_memory = FreeMemory(gpu.read, margin=1 * GB, wait_s=30.0, relieve=cpu_lane.relieve_memory)
    free_memory.poll_s = 0.05
    monkeypatch.setattr(cpu_lane, "free_memory", free_memory)
    monkeypatch.setattr(cpu_lane, "estimate_bytes", lambda input_bytes, output_bytes: ESTIMATE)
    return gpu


def _memory_layer(result):
    return next(layer for layer in result.layers if layer.name == "memory")


# -- the judge ---------------------------------------------------------------------------------------
def test_a_reference_out_of_memory_for_a_while_is_tried_again(cpu_lane, short_waits, tmp_path):
    reference = _reference_out_of_memory(tmp_path / "count", times=2)
    result = evaluate(reference, CORRECT, FAST, cpu_lane)
    assert result.status == Status.OK, result.error
    assert (tmp_path / "count").read_text() == "2"


def test_memory_that_never_comes_back_is_an_infra_error_that_names_it(cpu_lane, short_waits, tmp_path):
    reference = _reference_out_of_memory(tmp_path / "count", times=100)
    result = evaluate(reference, CORRECT, FAST, cpu_lane)
    assert result.status == Status.INFRA_ERROR
    assert "out of GPU memory preparing the reference 3 times" in result.error
    assert "other processes on this GPU hold it" in result.error and "Tried to allocate 6.00 GiB" in result.error


def test_a_judge_out_of_memory_tries_again_once_the_gpu_has_what_it_was_refused(cpu_lane, shared_gpu, tmp_path):
    shared_gpu.hold(reads=10)
    result = evaluate(_reference_out_of_memory(tmp_path / "count", times=1), CORRECT, FAST, cpu_lane)
    assert result.status == Status.OK, result.error
    memory = _memory_layer(result)
    assert "the judge out of GPU memory preparing the reference" in memory.detail
    assert "until 7.4 GB was free on the GPU (1.0 GB at first)" in memory.detail  # 6 GiB refused, 1 GB margin
    assert memory.duration_s >= 0.2 + 9 * 0.05


# -- before the executor starts ------------------------------------------------------------------------
def test_an_evaluation_waits_until_the_gpu_has_its_memory_free_and_then_runs(cpu_lane, shared_gpu):
    shared_gpu.hold(reads=10)
    result = evaluate(REFERENCE, CORRECT, FAST, cpu_lane)
    assert result.status == Status.OK, result.error
    memory = _memory_layer(result)
    assert "until 17.0 GB was free on the GPU (1.0 GB at first)" in memory.detail  # the estimate and the margin
    assert memory.duration_s >= 9 * 0.05


def test_memory_that_stays_taken_is_an_infra_error_that_says_what_was_free_and_needed(cpu_lane, shared_gpu):
    cpu_lane.free_memory.wait_s = 0.5
    shared_gpu.hold(reads=10**6)
    result = evaluate(REFERENCE, CORRECT, FAST, cpu_lane)
    assert result.status == Status.INFRA_ERROR
    assert "1.0 GB free of 80.0 GB" in result.error and "other processes on it hold the memory" in result.error
    assert "this evaluation needs 16.0 GB (the task's estimate), 1.0 GB of margin" in result.error


def test_an_evaluation_alone_on_the_lane_starts_with_its_minimum_when_no_more_memory_comes_free(
        cpu_lane, shared_gpu, monkeypatch):
    # Full-size level 1 on an H100: the largest estimates (about 52 GB) never came free while the sandbox's own
    # idle processes held 32 GB, and those evaluations waited out the limit.
    monkeypatch.setattr(cpu_lane, "minimum_bytes", lambda input_bytes, output_bytes: 4 * GB)
    cpu_lane.free_memory.settle_s = 0.3
    shared_gpu.hold(reads=10**6, leaves=10 * GB)  # the estimate and margin (17 GB) never come free; 4 GB do
    result = evaluate(REFERENCE, CORRECT, FAST, cpu_lane)
    assert result.status == Status.OK, result.error
    assert "then started alone with 10.0 GB free, below the 17.0 GB it waited for" in _memory_layer(result).detail


def test_while_an_evaluation_waits_the_lane_s_idle_processes_give_back_their_gpu_memory(
        cpu_lane, shared_gpu, monkeypatch):
    # On an H100 running full-size level 1 the lane's idle executors (a CUDA context each) held 19 GB and its
    # judges' caches 14 GB; the largest tasks waited for memory only the lane itself could give back.
    evaluate(REFERENCE, CORRECT, FAST, cpu_lane)  # the judge has the task and its expected outputs
    deadline = time.monotonic() + 30
    while cpu_lane.executors.idle == 0 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert cpu_lane.executors.idle == 1
    shed, trims = [], []
    original_shed, original_relieve = cpu_lane.executors.shed_idle, cpu_lane.relieve_memory

    def relieve():
        trims.append(_judge_trims(cpu_lane))
        original_relieve()
        trims.append(_judge_trims(cpu_lane))
        if sum(shed) and trims[-1] > trims[0]:
            shared_gpu.give_back()  # what they held comes free

    monkeypatch.setattr(cpu_lane.executors, "shed_idle", lambda: shed.append(original_shed()) or shed[-1])
    monkeypatch.setattr(cpu_lane, "_judges_trimmed", float("-inf"))
    cpu_lane.free_memory.relieve = relieve
    shared_gpu.hold(reads=10**6)
    result = evaluate(REFERENCE, CORRECT, FAST, cpu_lane)
    assert result.status == Status.OK, result.error
    assert sum(shed) == 1 and trims[-1] == trims[0] + 1
    memory = _memory_layer(result)
    assert "until 17.0 GB was free on the GPU (1.0 GB at first)" in memory.detail
    assert memory.duration_s < cpu_lane.free_memory.settle_s


def _judge_trims(lane) -> int:
    with lane.judges[0].lock:
        return lane.judges[0].request({"op": "stats"}, 30)["counts"].get("trims", 0)


# -- the executor out of memory ------------------------------------------------------------------------
def test_an_executor_refused_memory_that_another_process_took_tries_again_and_passes(cpu_lane, shared_gpu):
    # Another process takes the memory just after the evaluation was admitted (the first reading), and gives it
    # back ten readings later: the executor is refused 6 GiB, within the task's share, so the evaluation starts
    # over once the memory is free.
    shared_gpu.after[1] = lambda: shared_gpu.hold(reads=10)
    reference = _reference_refused_in_the_executor(shared_gpu.refused, "6.00 GiB")
    result = evaluate(reference, CORRECT, FAST, cpu_lane)
    assert result.status == Status.OK, result.error
    memory = _memory_layer(result)
    assert "the executor ran out of GPU memory (0.0 GB held and 6.4 GB refused" in memory.detail
    assert "tried again" in memory.detail and "until 17.0 GB was free on the GPU (1.0 GB at first)" in memory.detail
    assert [layer.name for layer in result.layers].count("correctness") == 1  # the failed attempt's are gone


def test_an_executor_refused_its_memory_every_time_is_an_infra_error_that_says_so(cpu_lane, shared_gpu):
    shared_gpu.refused.touch()  # whatever the reading says
    result = evaluate(_reference_refused_in_the_executor(shared_gpu.refused, "6.00 GiB"), CORRECT, FAST, cpu_lane)
    assert result.status == Status.INFRA_ERROR
    assert "the executor ran out of GPU memory 3 times within the task's share" in result.error


def test_an_allocation_beyond_the_task_s_share_is_the_candidate_s_own_runtime_error(cpu_lane, shared_gpu):
    # A stand-in for a candidate that asks for 4 TiB (an output of that size): the executor cannot tell whose
    # allocation it was; asking for more than the task's share, or the device's, is the candidate's doing.
    shared_gpu.refused.touch()
    result = evaluate(_reference_refused_in_the_executor(shared_gpu.refused, "4096.00 GiB"), CORRECT, FAST, cpu_lane)
    assert result.status == Status.RUNTIME_ERROR
    assert "beyond this task's share of 16.0 GB" in result.error and "Tried to allocate 4096.00 GiB" in result.error


def test_an_executor_out_of_memory_before_any_candidate_kernel_is_never_the_candidate_s(cpu_lane, shared_gpu):
    shared_gpu.refused.touch()
    reference = _reference_refused_in_the_executor(shared_gpu.refused, "4096.00 GiB", after_inputs_ready=False)
    result = evaluate(reference, CORRECT, FAST, cpu_lane)
    assert result.status == Status.INFRA_ERROR
    assert "ran out of GPU memory 3 times" in result.error


# -- how an out-of-memory is told apart ------------------------------------------------------------------
FREE_1 = DeviceMemory(1 * GB, TOTAL)


@pytest.mark.parametrize("held, requested, device, load", [
    (4 * GB, 6 * GB, FREE_1, True),  # within the share: the device was short
    (4 * GB, 13 * GB, FREE_1, False),  # the share is 16 GB: the candidate asked for more
    (0, 4096 * GB, FREE_1, False),  # more than the device has at all
    (4 * GB, None, FREE_1, True),  # the driver's own error: at least what was free, still within the share
    (4 * GB, None, DeviceMemory(20 * GB, TOTAL), False),  # the device had the share free: it asked for more
    (4 * GB, 6 * GB, None, True),  # the device unread: the share alone
    (4 * GB, None, None, False),  # nothing known: the candidate's, as before
])
def test_an_out_of_memory_is_load_within_the_task_s_share_and_the_device(held, requested, device, load):
    assert out_of_memory_is_load(held, requested, ESTIMATE, device) is load


def test_the_refused_allocation_is_read_from_torch_s_message():
    import torch

    assert harness.refused_bytes(torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 6.00 GiB. "
                                                             "GPU 0 has a total capacity of 79.19 GiB")) == 6 << 30
    assert harness.refused_bytes(RuntimeError("Triton Error [CUDA]: out of memory")) is None
    assert harness.out_of_memory(RuntimeError("Triton Error [CUDA]: out of memory"))
    assert not harness.out_of_memory(RuntimeError("DefaultCPUAllocator: can't allocate memory"))
