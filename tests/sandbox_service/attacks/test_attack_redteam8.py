"""Red team 8: the relaxed policy's total bound on compute elements (`runner.oversized_compute`,
`Replay.compute_elements`/`largest_compute`), nested complex bands, the retried timing batch.
Each test asserts the secure behaviour, so each FAILS while its flaw is there (CPU interpreter lane).

- FINDING cdist-redispatches-to-euclidean-dist: `torch.cdist` is CompositeImplicitAutograd; for p=2 and more
  than 25 rows it reaches the dispatch mode as `aten::_euclidean_dist` (CompositeExplicitAutograd, whose inner
  matmul the mode never sees). `_euclidean_dist` matches no heavy family (`cdist|pdist` only), and it makes only
  M x N elements, so neither size bound fires. A matmul is (|a|^2 + |b|^2 - cdist(A, B^T)^2) / 2: O(MNK) work in
  one "light" operator; with one decorative kernel it is `ok` under relaxed.
- FINDING softmax-spelled-elementwise: a HEAVY_OPS operator whose work is linear in its output (softmax) spelled
  as amax/sub/exp/sum/div stays within both bounds (about 3x the input's elements) and is `ok` with one
  decorative kernel; the size bounds only catch super-linear work.
"""

from __future__ import annotations


import pytest

from relaxed_support import MATMUL, RELAXED, SOFTMAX, decorated
from sandbox_service.evaluation import evaluate
from sandbox_service.results import Status




# FINDING cdist-redispatches-to-euclidean-dist
def test_a_matmul_through_cdist_is_not_ok_under_the_relaxed_policy(cpu_lane):
    """The matmul problem (32x48 @ 48x40) under relaxed: forward computes A @ B from `torch.cdist(A, B.t())`
    (seen at runtime as `_euclidean_dist`, not a heavy family) and row/column squared norms, then one kernel
    loads and stores the result unchanged. Expected: not `ok`; got `ok`."""
    source = decorated('''
        d = torch.cdist(a, b.t())
        out = (a.pow(2).sum(1, keepdim=True) + b.pow(2).sum(0, keepdim=True) - d * d) / 2''')
    result = evaluate(MATMUL, source, RELAXED, cpu_lane)
    assert result.status != Status.OK, (
        f"a matmul by torch.cdist with one decorative kernel came back {result.status.value} under relaxed "
        f"(violations {[v.rule for v in result.violations]})")


SOFTMAX_CANDIDATE = decorated("""
        e = (x - x.amax(1, keepdim=True)).exp()
        out = e / e.sum(1, keepdim=True)""", params="x")


# FINDING softmax-spelled-elementwise
@pytest.mark.xfail(strict=True, reason=(
    "open, by the relaxed policy's definition (docs/verifier_rules.md): torch's light compute is allowed there, "
    "and a heavy operator whose work is linear in its output (softmax, norms, pooling) written out elementwise "
    "stays within the size bounds; the strict policy, the reward's default, refuses it"))
def test_a_softmax_by_elementwise_torch_is_not_ok_under_the_relaxed_policy(cpu_lane):
    """The softmax problem under relaxed: forward computes softmax with amax, sub, exp, sum and div (about 3x
    the input's elements in all, within both bounds), then one decorative kernel. Expected: not `ok`; got `ok`."""
    result = evaluate(SOFTMAX, SOFTMAX_CANDIDATE, RELAXED, cpu_lane)
    assert result.status != Status.OK, (
        f"a softmax by torch with one decorative kernel came back {result.status.value} under relaxed "
        f"(violations {[v.rule for v in result.violations]})")
