"""Red team 11: the outside floor's empty batch measured twice (c2e561d), the memory waits' "start alone with the
minimum" rule (5dab87a: `FreeMemory.admitted(minimum=...)`, `settle_s`, `lane.minimum_bytes`) and the queued timing
protocol (f22efa4: `timing.time_cuda(lead_us=...)`). Each test asserts the secure behaviour, so each FAILS while its
flaw is there. Everything runs on the CPU: the floor through `_Evaluation._time` with stand-ins for the executor and
the server's clock (as tests/sandbox_service/timing_support.py does), the memory rule on the interpreter lane with
test_memory_waits.py's SharedGpu standing in for NVML, and the executor's timing call stubbed.

- FINDING empty-batch-inflated-by-queued-work (GPU, argued; shown with stand-ins): "timing has the GPU alone" holds
  for launches only. The timing gate waits for the judge's requests and the freezer SIGSTOPs every other untrusted
  process of the lane, but GPU work those processes queued before the freeze keeps running: an executor in its
  trials is not under the gate, and one Triton kernel of a candidate can run for seconds (a long loop; its time
  frozen is even added back to its own deadline). Its context is time-sliced with the timed one, so the timed
  evaluation's batches read long on the server's clock. Whatever the first evaluation of a task (per lane, warm-up
  and run count) measured as its empty batch was kept for every later evaluation of the task: one candidate whose
  kernel ran through a sibling's two empty batches (an RL group is G samples of one task on one lane, evaluated
  concurrently) set the empty batch as long as a timed batch, and the floor was 0 for the task from then on, so the
  executor's figure (not a trusted witness: its context runs the candidate's kernels) was used as it came. The same
  queued work also slows honest evaluations' timed batches (lower speedups for others: not fixed here).
  Fix (evaluation.py): the kept empty batch is the quickest ever measured for its key; it is measured again by an
  evaluation whose first batch the floor cannot trust (the floor bound, or the batch read no longer than the empty
  batch: an empty batch plus work cannot be shorter than the empty batch), both batches then set against it, and by
  a secret share of the others (EMPTY_BATCH_REFRESH), so a long measurement lasts until the next one that is not.
  Open: the root cause. A timing hold should start with the GPU idle of other contexts (e.g. NVML's per-process
  utilisation of the lane's other processes read as zero after the freeze, or executors' trial phases holding the
  gate's shared side as the judge's requests do); until then an attacker that keeps the GPU busy through every
  measurement of a task also slows the timed batches it would gain from, and one that inflates a refresh only lowers
  the floor until the next.

- FINDING oom-at-will-when-started-alone: an evaluation started alone (its minimum free, the free reading settled)
  has less free than its estimate, but an executor out of memory was still load whenever it held and asked for no
  more than the estimate. So any candidate of such a task (full-size level 1 on a busy GPU: exactly the case the
  rule was made for) made a genuine out-of-memory at will by allocating between what was free and its estimate
  (a glue `aten.empty`, allowed under strict): load, a fresh executor, the same shortage, 5 tries, each holding the
  lane alone (the next evaluation waits for its estimate beyond the alone one's) and a settle wait, then
  `infra_error`, which the trainer masks: a wrong kernel that allocates first is never `incorrect`. Before 5dab87a
  the evaluation started only with its estimate free, and the same allocation succeeded.
  Fix (evaluation.py): the share of an evaluation started alone is what the GPU had for it then (less the margin):
  an out-of-memory within it is still load (another process took memory after the start), beyond it the
  candidate's own runtime_error that says so. The cost: an honest kernel that needs more than was free but less
  than its estimate is charged too (before 5dab87a it waited 600 s and ended infra_error; the estimate is an upper
  bound, so this is rare).

Ideas that failed (regression tests below where one makes sense):
- the empty batch's cache key: (task, warm-up runs, timed runs), written under the exclusive gate (two evaluations of
  one task never measure at once); copy_bytes comes from the judge's prepared output size, the checks' rate is
  the lane's, so no client option sets another's floor.
- the candidate influencing its own executor's empty batch: no candidate kernel runs after `outputs_done` (every
  trial synchronises before its hand-over) until the timed batch, which comes after the calibration; first-time
  allocations its constants or cached trial blocks might force (the cap, fragmentation) are paid in the first
  calibration only, and the quicker one is kept. The executor checks a calibrate order as a time order (at most
  max_timing_checks distinct runs in range) and never replaces seeds from it.
- making the floor bind on purpose: a second batch with new secrets and new checks, the executor's figure stays the
  first's (red team 7); with this fix it also costs a new empty batch, which only lowers the kept one.
- FreeMemory's alone rule racing: the check and the `_admitted` increment happen under one lock, so two waiters
  never both start alone; a waiter is alone only while nothing is admitted. Starving a large task so that it waits
  out FREE_MEMORY_WAIT_S needs evaluations admitted without a gap of settle_s, which is load, not an attack (and was
  the behaviour before 5dab87a). Keeping the reading "rising" needs an admitted executor (only those free memory).
- an out-of-memory charged to another evaluation's candidate: blame uses the other evaluation's own share and its
  own executor's allocator peak; the alone rule admits nothing beside the alone evaluation. The residual of red
  team 10 stands: an executor may hold up to EXECUTOR_MEMORY_FACTOR times its estimate, so a hog can still make a
  neighbour's out-of-memory within its share (load, retried) and a judge's (infra_error after 3 tries).
- time_cuda(lead_us): the default path (lead_us None) is unchanged: synchronise before every start event
  (tests/sandbox_service/test_timing.py) and the executor passes no lead (test below). Queued runs: each run's inputs
  are made after the last call was launched and its inputs dropped; device-made inputs are produced by kernels on the
  same stream, so they do not exist until the previous run's kernels are done, and the caching allocator's reuse of
  the freed block is stream-ordered. Argued residuals, both paths: a reference whose get_inputs builds host tensors
  has them staged by the driver (pageable copy) while the previous call's kernels may still run (before_run(i+1)
  follows fn(i) with no synchronisation in either path); in the default path the host then synchronises, so a run
  sees at most one run ahead, which cannot move the median (half the runs at most could be free). In the queued path
  device-made inputs' RNG seeds sit in launch parameters the host may enqueue several runs ahead; a kernel that could
  read them would skip k-1 of every k runs, but the outside floor (half of what the server's clock saw per run) caps
  that at 2x, and the protocol is only used by benchmarks.
"""

from __future__ import annotations

import pytest

import sandbox_service.evaluation as evaluation
from sandbox_cases import CORRECT, FAST, REFERENCE
from sandbox_service.evaluation import OUTSIDE_FLOOR, TIMING_ATTEMPTS, evaluate
from sandbox_service.results import EvalResult, Status
from sandbox_service.worker.pool import FreeMemory
from test_memory_waits import GB, SharedGpu, _reference_refused_in_the_executor
from timing_support import stand_in_lane, time_with


def _timed(lane, executor_us: float, outside_us: float, empty_extra_us: float = 0.0) -> EvalResult:
    """One evaluation of the task "task" timed on `lane` (shared between calls): the executor claims
    `executor_us`, the server's clock sees `outside_us` per call beyond an idle empty batch, and every empty batch
    this evaluation measures takes `empty_extra_us` per call more (another context's queued kernel running)."""
    return time_with([(executor_us, outside_us)] * TIMING_ATTEMPTS, [empty_extra_us] * 8, lane=lane)[0]


# FINDING empty-batch-inflated-by-queued-work
def test_an_empty_batch_read_long_once_does_not_void_the_floor_of_the_task(monkeypatch):
    """The task's first evaluation (honest, 200 us a run) is timed while another evaluation's kernel, queued before
    the freeze, runs through both of its empty batches (+300 us a call). A later evaluation of the task whose
    executor claims 1 us where the server's clock sees 200 us a run must still meet the floor."""
    monkeypatch.setattr(evaluation, "EMPTY_BATCH_REFRESH", 0.0, raising=False)  # no secret refresh: the check alone
    lane = stand_in_lane()
    honest = _timed(lane, 200.0, 200.0, empty_extra_us=300.0)
    assert honest.status == Status.OK
    forged = _timed(lane, 1.0, 200.0)
    assert forged.candidate_time_us >= 0.99 * OUTSIDE_FLOOR * 200.0, (
        f"the executor's 1 us was used ({forged.candidate_time_us:.1f} us, speedup {forged.speedup:.0f}x): the "
        "empty batch measured while another process's queued kernel ran was kept for the task, longer than any "
        "timed batch, and the floor was 0")


def test_an_empty_batch_read_long_once_lowers_the_floor_only_until_it_is_measured_again():
    """As above with the empty batch read long by less than the timed work (+150 us a call), and a forged figure
    chosen just above the floor that leaves (30 us: the floor does not bind, so nothing looks wrong in that
    evaluation). Within a hundred later evaluations of the task the floor must be back (the secret refresh, one in
    ten: this fails by chance about once in 30,000 runs)."""
    lane = stand_in_lane()
    _timed(lane, 200.0, 200.0, empty_extra_us=150.0)
    for _ in range(100):
        forged = _timed(lane, 30.0, 200.0)
    assert forged.candidate_time_us >= 0.99 * OUTSIDE_FLOOR * 200.0, (
        f"{forged.candidate_time_us:.1f} us charged where the server's clock saw 200 us a run: the long empty batch "
        "of the task's first evaluation still sets the floor")


def test_an_honest_kernel_s_figure_stands_with_an_empty_batch_measured_again():
    lane = stand_in_lane()
    _timed(lane, 200.0, 200.0, empty_extra_us=300.0)
    honest = _timed(lane, 200.0, 200.0)
    assert honest.candidate_time_us == pytest.approx(200.0) and honest.speedup == pytest.approx(2.0)


# -- memory: started alone -------------------------------------------------------------------------------------------
ESTIMATE = 16 * GB


@pytest.fixture
def alone_gpu(cpu_lane, monkeypatch, tmp_path):
    """The CPU lane on a shared GPU where the task's estimate (16 GB and a 1 GB margin) never comes free: 10 GB do,
    and stay (the sandbox's own idle processes hold the rest); its minimum is 4 GB, and the reading settles in
    0.3 s, so every evaluation starts alone with 10 GB free."""
    monkeypatch.setattr(evaluation, "MEMORY_WAITS_S", (0.2, 0.2))
    gpu = SharedGpu(tmp_path / "refused")
    free_memory = FreeMemory(gpu.read, margin=1 * GB, wait_s=30.0)
    free_memory.poll_s, free_memory.settle_s = 0.05, 0.3
    monkeypatch.setattr(cpu_lane, "free_memory", free_memory)
    monkeypatch.setattr(cpu_lane, "estimate_bytes", lambda input_bytes, output_bytes: ESTIMATE)
    monkeypatch.setattr(cpu_lane, "minimum_bytes", lambda input_bytes, output_bytes: 4 * GB)
    gpu.hold(reads=10**9, leaves=10 * GB)
    return gpu


# FINDING oom-at-will-when-started-alone
def test_an_evaluation_started_alone_that_asks_beyond_what_was_free_is_not_load(cpu_lane, alone_gpu):
    """Stand-in: the executor is refused 12 GiB (the candidate's own allocation, within its 16 GB estimate, beyond
    the 10 GB the GPU had when it started alone). That is the candidate's out-of-memory, on the first try."""
    reference = _reference_refused_in_the_executor(alone_gpu.refused, "12.00 GiB")
    result = evaluate(reference, CORRECT, FAST, cpu_lane)
    assert result.status == Status.RUNTIME_ERROR, (
        f"{result.status.value}: {result.error[:300]} -- an allocation the candidate chose, between what was free "
        "when it started alone and its estimate, was load: tried again on fresh executors, each holding the lane "
        "alone, then masked as infra_error")
    assert "when it started alone" in result.error and "Tried to allocate 12.00 GiB" in result.error


def test_an_evaluation_started_alone_refused_within_what_was_free_is_still_load(cpu_lane, alone_gpu):
    """6 GiB refused where 9 GB (10 GB free less the margin) were there for it: another process took memory after
    the start, so it is load, tried again, and infra_error only when it happens every time."""
    reference = _reference_refused_in_the_executor(alone_gpu.refused, "6.00 GiB")
    result = evaluate(reference, CORRECT, FAST, cpu_lane)
    assert result.status == Status.INFRA_ERROR
    assert "the executor ran out of GPU memory 3 times within the task's share" in result.error


def test_an_evaluation_started_alone_that_fits_is_ok(cpu_lane, alone_gpu):
    result = evaluate(REFERENCE, CORRECT, FAST, cpu_lane)
    assert result.status == Status.OK, result.error
    assert "then started alone with 10.0 GB free" in next(layer.detail for layer in result.layers
                                                          if layer.name == "memory")


# -- the default timing protocol -------------------------------------------------------------------------------------
def test_the_executor_times_with_the_synchronised_protocol(monkeypatch):
    """The outside floor is calibrated for KernelBench's synchronised runs; the queued protocol (lead_us) is for
    benchmarks only: the executor must not pass a lead."""
    from sandbox_service import timing
    from sandbox_service.executor import runner

    seen = {}

    def time_cuda(fn, **kwargs):
        seen.update(kwargs)
        return timing.summarize([0.05], kwargs["method"])

    monkeypatch.setattr(timing, "time_cuda", time_cuda)
    emitted = []
    assert runner._time(lambda kind, **fields: emitted.append(kind), lambda: None,
                        {"warmup_runs": 3, "timing_runs": 100}, "timing")
    assert emitted == ["timing"] and seen.get("lead_us") is None and seen["method"] == timing.CUDA_EVENTS
