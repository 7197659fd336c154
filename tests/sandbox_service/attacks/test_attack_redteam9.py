"""Red team 9: the timing protocol of b5c9abb (each timed run checked on its own, `evaluation.timing_order`; a
sample copied after the checked runs only, `runner._time_checked`; the checks compared in one turn of the judge,
`JudgeLink.compare_together`). Each test asserts the secure behaviour, so each FAILS while its flaw is there.
Everything runs on the CPU: the executor's own `_time_checked` under timing.time_cuda's call order without CUDA
(as test_attack_redteam4.py drives it), with the server's own `timing_order`.

What a candidate's kernels can do in the executor (kernels.py lets all of this through): read the GPU's clock
(`globaltimer`), so see the longer gap after each checked run (docs/security.md, red team 4); read every input
value; keep state from one forward to the next in a constant; run as much integer arithmetic as they like.

- FINDING run-seeds-predictable: an unchecked run's inputs come from `harness.trial_seeds(run_seed, runs,
  trial_key)`, i.e. the outputs of ONE `random.Random` (Mersenne Twister) stream, `randrange(1, 2**31 - 1)` = 1 +
  the top 31 bits of each tempered 32-bit output; a checked run's seed is replaced by an independent SystemRandom
  draw. MT19937 is linear: its word j is word j-227 XOR twist(word j-624, word j-623), and tempering is an
  invertible linear map, so 624 consecutive seeds (31 of 32 bits of each word) leave each word with two candidates,
  and every later run's seed is one of at most eight values computed from them. A kernel that has recovered the
  seeds of 624 consecutive unchecked runs (it knows which past runs were checked: the gap) can, for every later
  run, compute those <= 8 candidate seeds, regenerate the first input values from each (a handful of Philox
  evaluations: microseconds) and compare with its real inputs: a match means an unchecked run (skip all the work),
  no match means the server replaced the seed, i.e. a checked run (do the work). Every check passes and every
  other run after the learning window is skipped. Recovering a seed from a run's inputs is a 2^31 search (torch's
  CUDA randn is Philox4x32-10 keyed by the seed: about 2^31 x 100 integer operations, ~10-30 ms on an H100, here
  stood in for by `torch.initial_seed()`), paid in the 624 learning runs only: with timing_runs >= ~1300 (options
  allow 10,000) more than half the timed runs are skipped, so the executor's median is an empty kernel's; the
  outside floor still charges half the batch's mean per call (half of 624 x ~20 ms over 10,000 calls: ~0.6 ms),
  so the fake speedup pays on tasks whose honest forward takes more than about a millisecond (with 10,000 runs:
  about 93% of the work skipped, every check passed, `ok`). The test asserts that the inputs of earlier runs do not
  let a kernel tell the checked later runs apart. Fix: no run's seed may be computable from other runs' seeds: derive
  each run's seed on its own with a keyed cryptographic function (e.g. BLAKE2b keyed with the lane's secret over
  run_seed and the run's index, as `call_sample_seed` does for the sample), or draw all of them from
  `secrets`/SystemRandom in the server, so that an unchecked run's seed and a check's are indistinguishable draws.

Ideas that failed (no test):
- anything the executor does before a run that differs when that run is checked: `replace_seed` runs before the
  batch for all checks at once, and `before_run` does the same for every run (copy the *last* run's sample if it
  was checked, drop the last inputs, make these from their seed: same shapes, same allocation order); the
  check's seed travels the same path as the run's (`trial_inputs`, `seed_everything`). The sample copy after a
  checked run allocates (an index tensor, the gathered sample) and frees before the next inputs: at most it moves
  a later address, which says what the gap already says, of the past.
- the cap at MAX_TIMING_CHECKS: seeing 16 checks frees the rest of the batch, but more than 16 checks is drawn
  about once in 10^5 batches at any length (Poisson(5) tail; Binomial tails are thinner for short batches).
- short batches: for timing_runs <= 5 every run is checked; from 6 runs on the rate is 5/runs, and skipping a
  share s of the runs passes with about exp(-5 s) at every length (the documented residual, 1 in 12 at s = 1/2).
- the floor and the empty batch: the empty batch copies at its own order's checked runs (Poisson(5) copies,
  fixed once cached) where the timed batch copies at its own: a difference of a few copies in ~100 calls, a few
  microseconds of floor, not in the candidate's control; the empty batch runs no candidate kernel, and its only
  dependence on the first candidate is the GPU's state (its clocks after a hot trial phase: argued, a few %).
- `compare_together`: answers are matched to requests in order under one lock (the service checks each answer's
  id); only `compared` and `malformed` answers are kept, each still goes through `_timing_check` (a `compared`
  with passed False is `incorrect`, a `malformed` is `cheat`); anything else, or the rest after a ServiceFailure,
  is asked again through `compare`, which retries, prepares again and waits for memory; the hand-overs are the
  trusted executor's files of host (pageable) samples, pinned by `_expect` to set 0, trial `trials + check`, in
  order, and the judge takes the seed and sample seed from the server only. Nothing in a turn reaches another
  evaluation's request (its own lock turn, its own outputs folder).
- the driver's pinned staging buffers of the sample's copies (an index tensor up, the sample down) stay readable
  by later kernels: they hold a past check's indices and values, already on the host, and each call's indices come
  from their own BLAKE2b seed.
"""

from __future__ import annotations

import secrets
import types

import torch

from sandbox_service.evaluation import EXPECTED_TIMING_CHECKS, MAX_TIMING_CHECKS, timing_order
from sandbox_service.executor import runner
from sandbox_service.worker import harness
from timing_support import time_on_the_cpu

# -- the Mersenne Twister, as a kernel would compute it (integer arithmetic only) -------------------------------------

_M32 = 0xFFFFFFFF


def _temper(y: int) -> int:
    y ^= y >> 11
    y ^= (y << 7) & 0x9D2C5680
    y ^= (y << 15) & 0xEFC60000
    y ^= y >> 18
    return y & _M32


def _undo_right(y: int, shift: int) -> int:
    x = y
    for _ in range(32 // shift + 1):
        x = y ^ (x >> shift)
    return x & _M32


def _undo_left(y: int, shift: int, mask: int) -> int:
    x = y
    for _ in range(32 // shift + 1):
        x = y ^ ((x << shift) & mask)
    return x & _M32


def _untemper(y: int) -> int:
    return _undo_right(_undo_left(_undo_left(_undo_right(y, 18), 15, 0xEFC60000), 7, 0x9D2C5680), 11)


def _twist(upper: int, lower: int) -> int:
    y = (upper & 0x80000000) | (lower & 0x7FFFFFFF)
    return (y >> 1) ^ (0x9908B0DF if y & 1 else 0)


def _seed_of(word: int) -> int:
    """randrange(1, 2**31 - 1) from one MT word: 1 + getrandbits(31) (a rejection is once in 2^30 draws)."""
    return 1 + (_temper(word) >> 1)


class _SeedPredictor:
    """The kernel's state (a constant buffer on a GPU): the candidate MT words of every run so far."""

    WINDOW = 624

    def __init__(self):
        self.words: dict[int, set[int]] = {}
        self.window_start = 0
        self.misses = 0  # predicted runs whose inputs matched no candidate (checks, while the clone is right)

    def learn(self, run: int, seed: int) -> None:
        """A run done honestly, its seed recovered from its inputs (the 2^31 search)."""
        value = seed - 1
        self.words[run] = {_untemper((value << 1) | low) for low in (0, 1)}

    def forget(self, run: int) -> None:
        """The gap said `run` was checked: a learnt seed was not the stream's, learning starts again after it
        (once predicting, a check is told apart by its inputs, and its candidate words are kept)."""
        if not self.ready(run):
            self.words.pop(run, None)
            self.window_start = run + 1

    def ready(self, run: int) -> bool:
        return run - self.window_start >= self.WINDOW

    def candidates(self, run: int) -> dict[int, set[int]]:
        """The seeds this run has if it is not checked, each with the MT words that give it."""
        out: dict[int, set[int]] = {}
        for a in self.words[run - 624]:
            for b in self.words[run - 623]:
                for c in self.words[run - 227]:
                    word = c ^ _twist(a, b)
                    out.setdefault(_seed_of(word), set()).add(word)
        return out


class Reference:
    @staticmethod
    def get_inputs():
        return [torch.randn(64, 64)]


def _inputs_from(seed: int) -> torch.Tensor:
    """What a kernel regenerates from a candidate seed (on a GPU: the Philox stream of that key, a few values)."""
    return torch.randn(64, 64, generator=torch.Generator().manual_seed(seed))


# FINDING run-seeds-predictable
def test_earlier_runs_inputs_do_not_tell_a_kernel_which_later_runs_are_checked(monkeypatch):
    """One timed batch of 10,000 runs (an allowed timing_runs) on the server's own secrets (`timing_order`), run by
    the executor's own `_time_checked`. The candidate's forward does the work in the runs it cannot place and
    skips it (outputs left zero) in the runs whose inputs its Mersenne Twister clone predicts; it learns from the
    seeds of 624 consecutive unchecked runs (torch.initial_seed() stands in for the 2^31 search a GPU kernel makes
    on its inputs) and from the gap after each checked run (here: the executor's synchronize before a checked
    run's copy, which is what makes that gap). Secure: it cannot skip most runs while every check passes."""
    from sandbox_service import timing

    runs, warmup, trials = 10000, 3, 5
    order = timing_order(runs, EXPECTED_TIMING_CHECKS)
    checks = list(zip(order["checked_runs"], order["check_seeds"]))
    job = {"timing_runs": runs, "warmup_runs": warmup, "trial_key": secrets.token_hex(16),
           "max_timing_checks": len(checks), "trials": trials}

    gap = {"after_checked_run": False}
    real_synchronize = harness.synchronize

    def synchronize(device):  # only a checked run's copy synchronises here: the longer gap the kernel's clock sees
        gap["after_checked_run"] = True
        real_synchronize(device)

    predictor = _SeedPredictor()
    calls = [0]
    skipped: list[int] = []

    def forward(inputs):
        calls[0] += 1
        x = inputs[0]
        run = calls[0] - warmup - 1
        if run < 0:  # warm-up (run 0's inputs)
            return [x * 2]
        if gap["after_checked_run"]:
            predictor.forget(run - 1)
            gap["after_checked_run"] = False
        if predictor.misses > MAX_TIMING_CHECKS:  # more misses than a batch has checks: the clone is wrong
            return [x * 2]
        if predictor.ready(run):
            candidates = predictor.candidates(run)
            match = next((seed for seed in candidates if torch.equal(_inputs_from(seed), x)), None)
            if match is not None:  # the stream's seed: no check can be on these inputs
                predictor.words[run] = candidates[match]
                skipped.append(run)
                return [torch.zeros_like(x)]
            predictor.words[run] = set().union(*candidates.values())  # a check: the stream's word is one of these
            predictor.misses += 1
            return [x * 2]
        predictor.learn(run, torch.initial_seed())  # the 2^31 search on the inputs, on a GPU
        return [x * 2]

    handed: dict[int, list[torch.Tensor]] = {}
    monkeypatch.setattr(timing, "time_cuda", time_on_the_cpu)
    monkeypatch.setattr(harness, "synchronize", synchronize)
    monkeypatch.setattr(runner, "hand_over", lambda job, emit, control, outputs, set_index, trial, fingerprint:
                        handed.__setitem__(trial - trials, outputs))
    runner._time_checked(job, lambda kind, **fields: None, None, types.SimpleNamespace(run=forward),
                         runner.timing_inputs(job, Reference, order["run_seed"], torch.device("cpu")), checks,
                         calibrate=False, sample_seed=order["sample_seed"])
    monkeypatch.undo()

    # The judge's view: each check's sample against the reference's outputs on the check's seed (64 x 64 = 4,096
    # elements: the whole output is the sample).
    passed = all(torch.equal(handed[check][0], (_inputs_from(seed) * 2).reshape(-1))
                 for check, (_, seed) in enumerate(checks))
    caught = sorted(set(skipped) & set(order["checked_runs"]))
    assert not (passed and len(skipped) > runs // 2), (
        f"the kernel skipped {len(skipped)} of {runs} timed runs (the executor's median is an empty kernel's) and "
        f"all {len(checks)} checks passed (checked runs skipped: {caught}): every unchecked run's seed after its "
        f"624 learning runs was one of at most 8 values it computed from the earlier runs' seeds (one Mersenne "
        f"Twister stream), so a run whose inputs matched none was a check")
