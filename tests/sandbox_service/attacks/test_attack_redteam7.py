"""Red team 7: the re-timed outside floor (`_Evaluation._time`, `_TimedAttempt`), complex outputs compared through
`view_as_real` (`correctness._flat`), the relaxed policy's bound on a compute operator's result
(`runner.oversized_compute`, `Replay.largest_compute`), the synchronised sample draw and the per-call sample seeds.
Each test asserts the secure behaviour, so each FAILS while its flaw is there. Everything runs on the CPU (the full
pipeline on the interpreter lane, or `_Evaluation._time` with stand-ins as test_timing_attempts.py drives it).

- FINDING relaxed-size-bound-evaded: the relaxed policy's new bound (no compute operator's result above 4x the
  forward's largest input or output) measures one tensor per step, and only results whose type is exactly
  `torch.Tensor`. A matmul spelled as K rank-1 updates (`out = out + a[:, k:k+1] * b[k:k+1, :]`: `mul` and `add`,
  each making exactly the output's M x N elements) never comes near the bound; red team 6's broadcast product and
  sum done four columns of A at a time (4 x M x N elements a step) stays within it. With one decorative kernel
  both are `ok` under relaxed. (Also: a result that is a tuple or list is not measured at all;
  `torch._foreach_mul([a[:, :, None]], [b[None]])` broadcasts and returns a list, M x K x N elements in one step,
  but the static screen refuses `torch._foreach_*` as torch internals, and no public tuple-returning operator found
  makes a broadcast product.)
- FINDING complex-outputs-never-degenerate: red team 6's fix compares complex outputs through `view_as_real`, but
  `correctness.constant_band` still returns the empty band for anything not `is_floating_point()`, so a complex
  output is never "degenerate" and never gets the relative-L2 bound that real outputs get when a constant would
  pass the tolerance. On a complex-output task with small values (|z| < atol), red team 6's candidate (real part in
  a kernel, every imaginary part zero) is `ok` again; the same numbers as a float output would be refused.
- FINDING timing-retry-is-a-candidate-controlled-redraw: a second timed batch happens whenever the floor binds in
  the first, and the lower of the two *verdicts* is kept, so the executor's figure is drawn again too. The
  candidate controls whether the floor binds without touching its own median: one long spin in a warm-up call (not
  in the executor's median, all in the server's clock; a kernel counts calls in a constant buffer and reads the
  GPU's global timer with inline asm). A kernel that saw its first batch run slow (its own timer) spins, and its
  verdict is the second batch's figure: best of two draws at its choice, an option honest kernels do not get.

Ideas that failed (no test):
- skipping work in one of the two batches: each `_timed_attempt` runs its own checks on its own new
  secrets (checked runs, check seeds, sample seed) and a failed check ends the evaluation `incorrect` before any
  second batch; the runner makes `timing_inputs` anew per order, so no replaced seed of batch 1 survives into
  batch 2; a gamble in batch 2 has the same odds as a gamble in a single batch.
- a forged executor figure gaining from the min of two floors: the floor is 0.5x the server's clock on each batch;
  the min of two noisy outside figures is a small bias (a few %), and on a GPU the replay's kernels all run on the
  timed stream between the events (no known way left to forge the figure).
- `_flat` itself: shape and dtype are checked before `_pairs`, so a real output cannot be compared against a
  complex one's doubled length; `resolve_conj` handles the conjugate bit; the judge's sample gather runs on the
  same complex shape on both sides.
- the synchronised draw: `copy_last` now synchronises before `sample_indices` for every call, the last included.
- the per-call sample seeds: BLAKE2b of the 63-bit batch secret and the call number, so an earlier call's indices
  (readable as freed device memory) say nothing about a later call's. Note (no attack): `sample_indices` seeds a
  `torch.Generator` whose mt19937 keeps only the low 32 bits, so each call's indices carry 32 bits, not 63.
- `is_heavy`'s new families: `addr` (an outer product), `dist` and `_foreach_*` are still outside them; each is
  a step in one of the constructions above rather than a new attack.
"""

from __future__ import annotations


import pytest
import torch

from complex_support import REAL_PART_ONLY, polar_reference
from relaxed_support import MATMUL, RELAXED, decorated
from timing_support import time_with
from sandbox_service.evaluation import evaluate
from sandbox_service.options import EvalOptions
from sandbox_service.results import Status



# -- the relaxed policy's size bound --------------------------------------------------------------------------------

MATMUL_UNDER_THE_BOUND = {
    # K rank-1 updates: every mul and add makes M x N elements, the output's own size
    "rank-1-updates": '''
        out = a[:, 0:1] * b[0:1, :]
        for k in range(1, a.shape[1]):
            out = out + a[:, k:k + 1] * b[k:k + 1, :]''',
    # red team 6's broadcast product and sum, four columns of A at a time: 4 x M x N elements, within 4x
    "chunked-broadcast-product": '''
        out = (a[:, 0:4].unsqueeze(2) * b[0:4].unsqueeze(0)).sum(1)
        for k in range(4, a.shape[1], 4):
            out = out + (a[:, k:k + 4].unsqueeze(2) * b[k:k + 4].unsqueeze(0)).sum(1)''',
}


# FINDING relaxed-size-bound-evaded
@pytest.mark.parametrize("how", sorted(MATMUL_UNDER_THE_BOUND))
def test_a_matmul_by_torch_under_the_size_bound_is_not_ok_under_the_relaxed_policy(cpu_lane, how):
    """The matmul problem (32x48 @ 48x40) under the relaxed policy. The candidate's forward computes A @ B with
    light torch operators that stay within `oversized_compute`'s 4x bound: K rank-1 updates (each step makes 1,280
    elements, the bound is 7,680), or the broadcast product and sum over 4 columns at a time (5,120 elements a
    step); then one kernel loads and stores the result unchanged.
    Expected: not `ok` (heavy work done by torch); got `ok`."""
    source = decorated(MATMUL_UNDER_THE_BOUND[how])
    result = evaluate(MATMUL, source, RELAXED, cpu_lane)
    assert result.status != Status.OK, (
        f"a matmul computed by torch ({how}) with one decorative kernel came back {result.status.value} under the "
        f"relaxed policy (violations {[v.rule for v in result.violations]})")


# -- complex outputs and the degenerate bound ----------------------------------------------------------------------

SMALL_POLAR = polar_reference("2e-3")


def test_a_complex_output_a_constant_would_pass_is_degenerate():
    """The root: `degenerate_outputs` on small complex outputs (every real and imaginary part within atol of 0)
    must say degenerate, as it does for the same numbers as a float tensor (view_as_real). Got: not degenerate."""
    from sandbox_service import correctness

    tolerances = lambda dtype: (1e-2, 1e-2)  # noqa: E731 - the default for every dtype
    trials = [[torch.polar((torch.rand(256) + 0.5) * 2e-3, torch.rand(256) * 6.0)] for _ in range(2)]
    as_real = [[torch.view_as_real(t[0])] for t in trials]
    assert correctness.degenerate_outputs(as_real, tolerances) == [True]  # the same numbers, real: degenerate
    assert correctness.degenerate_outputs(trials, tolerances) == [True], (
        "a complex output that a constant (0) passes is not treated as degenerate: no relative-L2 bound applies")


# FINDING complex-outputs-never-degenerate
def test_a_small_complex_output_with_every_imaginary_part_wrong_is_not_ok(cpu_lane):
    """The task returns `torch.polar(r, theta)` with |z| < 4e-3 (complex64). The candidate computes only
    r cos(theta) in its kernel and returns it as complex64 (every imaginary part 0 instead of r sin(theta), a
    relative L2 error of about 0.7). Expected: `incorrect` (a constant passes the tolerance here, so the relative
    L2 bound must apply, as it would to a float output); got `ok` (complex outputs are never degenerate)."""
    result = evaluate(SMALL_POLAR, REAL_PART_ONLY, EvalOptions(trials=2, timeout_s=60, memory_limit_mb=4096),
                      cpu_lane)
    assert result.status != Status.OK, (
        f"a small complex output whose imaginary parts are all wrong came back {result.status.value}: complex "
        "outputs never get the degenerate (relative L2) bound")


# -- the re-timed outside floor ------------------------------------------------------------------------------------

# FINDING timing-retry-is-a-candidate-controlled-redraw
def test_a_candidate_cannot_buy_a_second_draw_of_its_own_figure_by_slowing_the_server_s_clock():
    """An honest-work kernel whose executor figure varies between batches (190-230 us). In the first batch its
    own timer says it ran slow (230 us); it then spins in one warm-up call so that the server's clock sees 1,000 us
    per call (the floor binds: 500 > 230) while the executor's median (timed runs only) stays 230. The server
    times a second batch (190 us, clock 200 us) and keeps the lower verdict: 190 us. Had it not spun, its verdict
    was 230 us. Expected: a floor the candidate made bind does not earn it a new draw of the executor's figure
    (verdict >= 230 us, the first batch's figure: e.g. keep the first batch's executor figure, or the larger of
    the two, and take the min only over the floor term); got 190 us (speedup 2.1 instead of 1.74)."""
    attacked, batches = time_with([(230.0, 1000.0), (190.0, 200.0)])
    assert batches == 2  # the candidate chose to have a second batch
    unspun, _ = time_with([(230.0, 240.0)])
    assert unspun.candidate_time_us == pytest.approx(230.0)
    assert attacked.candidate_time_us >= unspun.candidate_time_us, (
        f"a spin outside the executor's median bought a second draw: verdict {attacked.candidate_time_us:.0f} us "
        f"(speedup {attacked.speedup:.2f}) where the first batch's own figure was {unspun.candidate_time_us:.0f} us "
        f"(speedup {unspun.speedup:.2f})")
