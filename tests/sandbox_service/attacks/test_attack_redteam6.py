"""Red team 6: the sampled timing checks, the fresh trial seeds, the reference timed on fresh inputs, the
relaxed policy's `is_heavy`. Each test asserts the secure behaviour, so each FAILS while its flaw is there.
Everything runs on the CPU (the full pipeline on the interpreter lane, or the executor's own timing code under
timing.time_cuda's real call order with CUDA stubbed out).

- FINDING complex-outputs-imaginary-part-ignored: `correctness.within` (and `_max_abs_error`) casts both sides to
  float32/float64 before comparing; for a complex output that cast *discards the imaginary part* (torch only
  warns). The judge therefore compares complex outputs by their real parts alone, in the trials and in the
  timing checks. A candidate for a complex-output task (FFTs, `torch.polar`, complex products) that computes the
  real part in a kernel and returns it as complex (`real.to(torch.complex64)`, plain glue under the strict
  policy) is `ok` with every imaginary part wrong (zero).
- FINDING relaxed-policy-heavy-work-by-light-ops: red team 5's fix (`verifier.runtime.is_heavy`: names and name
  families) is still a deny-list of operator names, and heavy work is reachable through operators outside it:
  a matmul as a broadcast multiply and a sum (`(a[:, :, None] * b[None]).sum(1)`: `mul` and `sum`, both
  "light"), or through pairwise distances (`torch.cdist` -> `_cdist_forward`/`_euclidean_dist`, O(M N K),
  from which A @ B is (|a|^2 + |b|^2 - d^2) / 2). Others the family regex misses (checked with `is_heavy`):
  `_linalg_solve_ex`, `linalg_inv_ex`, `triangular_solve`, `cholesky`, `_linalg_svd`, `_linalg_eigh`,
  `linalg_qr`, `linalg_matrix_exp`, `_pdist_forward`, `logsumexp`, `mkldnn_rnn_layer`/`_cudnn_rnn`
  (an LSTM), `_transformer_encoder_layer_fwd` (a whole transformer layer), `grid_sampler_2d`, `sort`/`topk`.
  With one decorative kernel each is `ok` under the relaxed policy.
- FINDING timing-sample-drawn-while-the-call-runs: the executor's docstring and docs/security.md say each timed
  call's sample indices are drawn "once the call's kernels are done". `_time_checked.copy_last` draws them in the
  *next* run's `before_run`, right after the previous `fn()` returned, and nothing synchronizes the device between
  that call's launches and the draw (time_cuda synchronizes only after `before_run` and the L2 flush). On a GPU
  the launches are asynchronous: the call's kernels may still be running when the indices exist on the host, and
  the very next step (`i.to(t.device)`, a pageable host-to-device copy) has the driver stage them, immediately, in
  pinned or pushbuffer memory that the GPU reads, while the kernel still runs. A kernel that computes nothing,
  then polls for its call's indices, computes those 4,096 elements per output and exits would pass every check.
  Shown here as the order of events under the real `timing.time_cuda` (CUDA stubbed): the fix is a device
  synchronization (or an event wait on the call's end) before the draw.

Ideas that failed (no test; candidates for regression tests):
- telling checked timed runs apart: the same host work after every call (a sample gathered and copied into a
  pre-zeroed pageable buffer, only which buffer is kept differs), inputs made in turn, no allocation that depends
  on the checks; CPU-cache effects of writing a cold kept buffer are 16 kB per output (under a microsecond).
- predicting the sample: its seed per call comes from `random.Random(sample_seed)` (31-bit outputs), each call's
  indices from `torch.Generator(seed)`; a kernel sees only earlier calls' index tensors (freed device memory), and
  recovering the Python MT state needs ~650 consecutive outputs (a batch has warm-up + 100) or a 2^31 brute force
  of `sample_seed` (GPU-only; see the report: seconds of GPU time, which the outside floor would charge).
- the gather reading something else: outputs are the replay's tensors; aliasing an input is caught in the
  trials (same program); views/expands/0-d/empty/non-contiguous outputs are flattened with `reshape(-1)` on both
  sides with the same shape (checked in the trials), so the executor's and the judge's index maps agree; the
  number and sizes of outputs cannot change between trials and timed runs (one program).
- cheap approximations with rare out-of-tolerance elements (what a sampled check lets through): passing 4,096
  samples but not a full 16M-element output is a Gaussian tail of 4.4 sigma against 5.5 sigma, a factor 1.25 in
  error budget, far below one precision step; skipping elements saves a share f << 1/4096 of the work.
- the fresh trial seeds: drawn by the server (SystemRandom), the executor's input fingerprints for `inputs_ready`
  finished before any kernel runs; the outputs_done input fingerprints are finished after the trials (their
  float64 samples lie on the device, writable by later kernels on a GPU), but a change there only reads as
  `inputs-tampered` (cheat) against the judge's.
- the reference's fresh-input timing: seeds fixed per task (`"reference timing"` key), cached per (method,
  warmup, runs, fresh); the candidate's executor is idle (blocked on its channel) while the judge times it.
- `untrusted_files`: `O_NOFOLLOW` on every component, FIFO opened non-blocking then refused by fstat, bounded
  reads; a hard link needs the target readable by the tracer (Landlock) and is bounded like any regular file.
"""

from __future__ import annotations

import types
import warnings

import pytest
import torch

from complex_support import REAL_PART_ONLY, polar_reference
from relaxed_support import MATMUL, RELAXED, decorated
from sandbox_service.evaluation import evaluate
from sandbox_service.options import EvalOptions
from sandbox_service.results import Status



# -- complex outputs ------------------------------------------------------------------------------------------------

POLAR = polar_reference("1.0")


# FINDING complex-outputs-imaginary-part-ignored
def test_a_complex_output_with_every_imaginary_part_wrong_is_not_ok(cpu_lane):
    """The task returns `torch.polar(r, theta)` (complex64). The candidate computes only r cos(theta) in its kernel
    and returns it cast to complex64, so every imaginary part is 0 instead of r sin(theta). Expected: `incorrect`
    (got `ok`: `correctness.within` casts complex values to float32, which drops the imaginary part)."""
    result = evaluate(POLAR, REAL_PART_ONLY, EvalOptions(trials=2, timeout_s=60, memory_limit_mb=4096), cpu_lane)
    assert result.status != Status.OK, (
        f"a complex output whose imaginary parts are all wrong came back {result.status.value}: the judge compares "
        "complex outputs by their real parts alone")


def test_the_comparison_itself_sees_the_imaginary_part():
    """The same flaw at its root, without processes: compare_trial on a complex output with a zeroed imaginary
    part must not pass (it does)."""
    from sandbox_service import correctness

    expected = torch.polar(torch.rand(256) + 0.5, torch.rand(256) * 6.0)
    lazy = expected.real.to(torch.complex64)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch warns that the cast drops the imaginary part
        verdict = correctness.compare_trial([expected], [lazy], lambda dtype: (1e-2, 1e-2), [False], 0.1)
    assert not verdict.passed, "compare_trial passed a complex output whose imaginary part is zero everywhere"


# -- the relaxed policy ---------------------------------------------------------------------------------------------

MATMUL_BY_LIGHT_OPS = {
    # a broadcast product and a reduction: mul and sum, neither "heavy"
    "mul-then-sum": '''
        out = (a.unsqueeze(2) * b.unsqueeze(0)).sum(1)''',
    # pairwise distances (O(M N K), _cdist_forward), then elementwise glue: a.b = (|a|^2 + |b|^2 - d^2) / 2
    "cdist": '''
        bt = b.t().contiguous()
        d = torch.cdist(a, bt, compute_mode="donot_use_mm_for_euclid_dist")
        out = ((a * a).sum(1, keepdim=True) + (bt * bt).sum(1).unsqueeze(0) - d * d) * 0.5''',
}


# FINDING relaxed-policy-heavy-work-by-light-ops
@pytest.mark.parametrize("how", sorted(MATMUL_BY_LIGHT_OPS))
def test_a_matmul_done_by_torch_through_unlisted_operators_is_not_ok_under_the_relaxed_policy(cpu_lane, how):
    """The matmul problem under the relaxed policy; the candidate's forward computes A @ B with torch operators
    that `is_heavy` does not know (a broadcast multiply and a sum; or `torch.cdist` and elementwise glue) and
    launches one kernel that loads and stores the result unchanged. The relaxed policy allows light glue
    compute, never the heavy lifting the kernel is for: the verdict must not be `ok` (got `ok`)."""
    source = decorated(MATMUL_BY_LIGHT_OPS[how])
    result = evaluate(MATMUL, source, RELAXED, cpu_lane)
    assert result.status != Status.OK, (
        f"a matmul computed by torch ({how}) with one decorative kernel came back {result.status.value} under the "
        f"relaxed policy (violations {[v.rule for v in result.violations]})")


# -- the timing sample ----------------------------------------------------------------------------------------------


class Reference:
    @staticmethod
    def get_inputs():
        return [torch.randn(128, 128)]


def _timed_batch_events(monkeypatch, runs: int = 8, warmup: int = 3) -> list[tuple]:
    """One timed batch of the executor's `_time_checked` under the real `timing.time_cuda` (its CUDA calls
    stubbed: device synchronizations and event records are logged); also logged: each forward's return (on a GPU
    its kernels may still be running from there on) and each draw of sample indices."""
    from sandbox_service import timing
    from sandbox_service.executor import runner
    from sandbox_service.worker import harness

    events: list[tuple] = []

    def synchronize(*args, **kwargs):
        events.append(("sync",))

    class Event:
        def __init__(self, enable_timing: bool = False):
            pass

        def record(self, *args):
            events.append(("event",))

        def synchronize(self):  # a wait on the call's end event is a fix too
            events.append(("sync",))

        def elapsed_time(self, other) -> float:
            return 1.0

    fake_torch = types.SimpleNamespace(
        empty=lambda n, dtype=None, device=None: torch.empty(n, dtype=dtype), int32=torch.int32,
        no_grad=torch.no_grad, cuda=types.SimpleNamespace(synchronize=synchronize, Event=Event))
    monkeypatch.setattr(timing, "torch", fake_torch)
    monkeypatch.setattr(timing, "l2_flush_bytes", lambda device=None: 1024)
    monkeypatch.setattr(torch.cuda, "synchronize", synchronize)
    real_synchronize = harness.synchronize
    monkeypatch.setattr(harness, "synchronize", lambda device: (synchronize(), real_synchronize(device)))
    real_sample = harness.sample_indices

    def sample_indices(numels, seed):
        events.append(("draw",))
        return real_sample(numels, seed)

    monkeypatch.setattr(harness, "sample_indices", sample_indices)
    monkeypatch.setattr(runner, "hand_over", lambda *args, **kwargs: None)

    def replay_run(inputs):
        out = inputs[0] @ inputs[0]
        events.append(("forward",))  # launches enqueued; on a GPU the kernels run on from here
        return [out]

    job = {"timing_runs": runs, "warmup_runs": warmup, "trial_key": "lane-secret", "max_timing_checks": 3, "trials": 2}
    runner._time_checked(job, lambda kind, **fields: None, None, types.SimpleNamespace(run=replay_run),
                         runner.timing_inputs(job, Reference, 77, torch.device("cpu")), [(1, 11), (4, 12), (6, 13)],
                         calibrate=False, sample_seed=99)
    monkeypatch.undo()
    return events


# FINDING timing-sample-drawn-while-the-call-runs
def test_a_timed_call_s_sample_is_drawn_only_after_its_kernels_are_done(monkeypatch):
    """Every draw of a timed call's sample indices must come after a device synchronization that follows that
    call's forward (otherwise, on a GPU, the indices exist, and are staged for the GPU by the next step's
    host-to-device copy, while the call's kernels may still run and could read them). Got: every draw but the
    last comes straight after the forward and its end event, before any synchronization."""
    events = _timed_batch_events(monkeypatch)
    draws, unsynchronized, synced = 0, 0, True
    for event in events:
        if event[0] == "forward":
            synced = False
        elif event[0] == "sync":
            synced = True
        elif event[0] == "draw":
            draws += 1
            unsynchronized += not synced
    assert draws > 0
    assert unsynchronized == 0, (
        f"{unsynchronized} of {draws} sample draws came after a forward with no device synchronization between: "
        f"the indices exist (and go to the GPU) while the call's kernels may still be running ({events[:16]} ...)")
