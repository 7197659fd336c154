"""Shape buckets: every jitted sampler function compiles once per bucket, never per prompt or step.

Lengths round up to a power of two (at least `minimum`) until `linear_step`, then to a multiple of
`linear_step`, so padding wastes at most half of a short prompt and less than `linear_step` tokens of
a long one while the number of distinct shapes (hence compilations) stays small.
"""

from __future__ import annotations


def length_bucket(n: int, minimum: int = 16, linear_step: int = 512) -> int:
    """The padded length for `n` tokens."""
    if n < 1:
        raise ValueError(f"length must be >= 1, got {n}")
    if minimum < 1 or linear_step < 1:
        raise ValueError("minimum and linear_step must be >= 1")
    if n <= linear_step:
        return max(minimum, 1 << (n - 1).bit_length())
    return -(-n // linear_step) * linear_step


def batch_bucket(n: int, max_batch: int, multiple: int = 1) -> int:
    """The padded number of rows for `n` rows: a power of two, capped at `max_batch`, then rounded
    up to `multiple` (the mesh's data-parallel size, so the batch splits evenly) when that fits."""
    if not 1 <= n <= max_batch:
        raise ValueError(f"a batch of {n} rows does not fit max_batch={max_batch}")
    rows = min(1 << (n - 1).bit_length(), max_batch)
    if multiple > 1 and max_batch >= multiple:
        rows = -(-rows // multiple) * multiple
    return rows
