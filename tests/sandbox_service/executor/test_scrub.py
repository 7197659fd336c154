"""A reused executor zeroes what a job freed before the next job's kernels can read it."""

from __future__ import annotations

import pytest
import torch

from sandbox_service.executor.scrub import free_spans, scrub_free_memory


def test_free_spans_are_the_blocks_no_tensor_holds():
    segments = [
        {"address": 1000, "blocks": [{"size": 100, "state": "active_allocated"}, {"size": 50, "state": "inactive"},
                                     {"size": 30, "state": "active_pending_free"}]},
        {"address": 5000, "blocks": [{"size": 64, "state": "inactive"}]},
    ]
    assert free_spans(segments) == [(1100, 50), (1150, 30), (5000, 64)]


def test_a_block_s_own_address_wins_over_the_running_sum():
    segments = [{"address": 0, "blocks": [{"size": 8, "state": "inactive", "address": 4096}]}]
    assert free_spans(segments) == [(4096, 8)]


@pytest.mark.gpu
def test_freed_memory_comes_back_zeroed_and_live_tensors_keep_their_values():
    device = torch.device("cuda", torch.cuda.current_device())
    torch.cuda.empty_cache()
    kept = torch.full((1 << 20,), 3.0, device=device)
    left = torch.full((1 << 20,), 7.0, device=device)
    address = left.data_ptr()
    del left
    zeroed = scrub_free_memory(device)
    again = torch.empty((1 << 20,), device=device)
    assert again.data_ptr() == address  # the caching allocator hands the same block back
    assert zeroed >= again.numel() * 4
    assert int(torch.count_nonzero(again)) == 0
    assert bool((kept == 3.0).all())
