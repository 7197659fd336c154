"""Fingerprints: the same hash whether computed one at a time or many at once, and nothing kept alive."""

from __future__ import annotations

import torch

from sandbox_service.worker import harness

GROUPS = [
    [[torch.randn(3, 4), 5, torch.randn(300_000).half()]],
    [[torch.randn(2, 2, dtype=torch.complex64), torch.arange(7)]],
    [[torch.randn(4, 4).t(), "text", None]],
    [[torch.randn(0)]],
    [[]],
]


def test_many_fingerprints_at_once_equal_one_at_a_time():
    one_by_one = [harness.fingerprint(groups) for groups in GROUPS]
    assert harness.finish_fingerprints([harness.fingerprint_parts(groups) for groups in GROUPS]) == one_by_one
    assert len(set(one_by_one)) == len(one_by_one)


def test_the_grid_keeps_its_rows():
    grid = [[harness.fingerprint_parts(GROUPS[0]), harness.fingerprint_parts(GROUPS[1])],
            [harness.fingerprint_parts(GROUPS[2])]]
    assert harness.finish_fingerprint_grid(grid) == [[harness.fingerprint(GROUPS[0]), harness.fingerprint(GROUPS[1])],
                                                     [harness.fingerprint(GROUPS[2])]]


def test_a_changed_value_changes_the_fingerprint():
    x = torch.randn(1000, dtype=torch.float64)
    before = harness.fingerprint([[x]])
    x[0] += 1
    assert harness.fingerprint([[x]]) != before


def test_kept_parts_do_not_hold_the_tensor_storage():
    for x in (torch.randn(1000, dtype=torch.float64), torch.randn(200_000), torch.randn(10, dtype=torch.complex128)):
        samples = [p for p in harness.fingerprint_parts([[x]]) if isinstance(p, torch.Tensor)]
        assert samples and all(s.untyped_storage().data_ptr() != x.untyped_storage().data_ptr() for s in samples)
