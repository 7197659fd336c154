"""Host values that must be one value on every process of a multi-process run, sent from process 0.

Every process builds its training batch on its own host, and `jaxrl.sharding.shard_array` fills each
process's shards from that process's copy: a host value that differs across processes (a sandbox
verdict, a measured speedup) would silently train each shard on different data. What only process 0
knows is therefore sent to the others with `broadcast_json`.
"""

from __future__ import annotations

import itertools
import json
from typing import Any

import jax
import numpy as np
from jax._src import distributed as jax_distributed  # the coordination client, as jax's own serialization uses it
from jax.experimental import multihost_utils

MIN_BUCKET_BYTES = 1024
# How long the other processes wait for process 0 (e.g. for a step's sandbox verdicts): generous, since a
# process that died is reported sooner by the coordination service.
WAIT_TIMEOUT_S = 6 * 3600.0

_calls = itertools.count()  # every process calls in the same order, so the n-th calls meet


def broadcast_json(value: Any, timeout_s: float = WAIT_TIMEOUT_S) -> Any:
    """Process 0's `value` (JSON-encodable) on every process, decoded from the same bytes everywhere;
    the other processes' `value` is ignored. On a single process: `value` itself, untouched.

    Every process must call it, in the same order. They first meet at a coordination-service barrier,
    where the others may wait up to `timeout_s` for process 0: waiting inside a device collective instead
    fails (gloo gives up on a new communicator after 30 s). Then a collective broadcasts the length, and
    the bytes zero-padded to a power of two, so it compiles once per size bucket, not once per step.
    """
    if jax.process_count() == 1:
        return value
    barrier = f"jaxrl/broadcast_json/{next(_calls)}"
    source = jax.process_index() == 0
    data = np.frombuffer(json.dumps(value).encode(), np.uint8) if source else np.zeros(0, np.uint8)
    try:
        jax_distributed.global_state.client.wait_at_barrier(barrier, int(timeout_s * 1000))
    except jax.errors.JaxRuntimeError as exc:
        raise RuntimeError(f"{barrier}: the processes did not all arrive within {timeout_s:g} s "
                           f"(process 0 still busy, or a process died)") from exc
    size = int(multihost_utils.broadcast_one_to_all(np.int32(data.size)))
    padded = np.zeros(max(MIN_BUCKET_BYTES, 1 << (size - 1).bit_length()), np.uint8)
    padded[: data.size] = data
    received = multihost_utils.broadcast_one_to_all(padded)
    return json.loads(received[:size].tobytes())
