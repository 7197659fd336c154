"""Shard seeds: the main stream's are what they always were, and the rl stream never shares one."""

from __future__ import annotations

import hashlib

from jaxrl.data.engine.shards import shard_seed


def test_the_main_streams_seeds_are_unchanged_and_the_rl_streams_are_its_own():
    main = [shard_seed(0, k) for k in range(200)]
    rl = [shard_seed(0, k, "rl") for k in range(200)]
    assert main == [int.from_bytes(hashlib.sha256(f"0/{k}".encode()).digest()[:4], "big") & 0x7FFFFFFF
                    for k in range(200)]
    assert not set(main) & set(rl) and len(set(rl)) == 200
