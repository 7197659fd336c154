"""Shapes and dtypes per scale.

`full`: sizes at which the reference takes tens of microseconds or more on an H100 (8-64 M elements for
memory-bound ops, matmuls of about 1024-4096), with at most about 1 GB of inputs per trial.
`cpu`: at most 4096 elements per tensor and small matmuls, so that the Triton interpreter runs a kernel
in well under a second. Sizes are often odd (not multiples of any block size) so that masks matter.
"""

from __future__ import annotations

import math
import random

SCALES = ("full", "cpu")
CPU_MAX_NUMEL = 4096
FULL_MAX_NUMEL = 1 << 26
# Total elements of one memory-bound tensor.
ELEMENTWISE_NUMEL = {"cpu": (256, CPU_MAX_NUMEL), "full": (1 << 23, 1 << 26)}


def check_scale(scale: str) -> None:
    if scale not in SCALES:
        raise ValueError(f"unknown scale {scale!r}; expected one of {SCALES}")


def max_numel(scale: str) -> int:
    return CPU_MAX_NUMEL if scale == "cpu" else FULL_MAX_NUMEL


def pick_dtype(rng: random.Random, scale: str, allow_half: bool = True, allow_bf16: bool = True) -> str:
    """fp32 most often; fp16; bf16 only at full scale (the interpreter mishandles bf16 arithmetic)."""
    options = ["float32", "float32"]
    if allow_half:
        options.append("float16")
    if allow_half and allow_bf16 and scale == "full":
        options.append("bfloat16")
    return rng.choice(options)


def log_uniform(rng: random.Random, low: float, high: float) -> int:
    return int(round(math.exp(rng.uniform(math.log(low), math.log(high)))))


def roughen(rng: random.Random, size: int) -> int:
    """Keep a size round (a multiple of 16) half the time, otherwise nudge it to an odd value."""
    if size < 16 or rng.random() < 0.5:
        return max(1, size)
    nudged = size + rng.choice([-3, -1, 1, 3, 5])
    return max(2, nudged if nudged % 16 else nudged + 1)


def split(rng: random.Random, total: int, rank: int, last: int | None = None, minimum: int = 2) -> list[int]:
    """A shape of `rank` axes with about `total` elements; `last` fixes the last axis."""
    sizes: list[int] = []
    remaining = total / last if last else total
    free = rank - 1 if last else rank
    for axis in range(free):
        left = free - axis
        if left == 1:
            size = remaining
        else:
            size = remaining ** (1 / left) * rng.uniform(0.5, 2.0)
        size = max(minimum, int(round(size)))
        sizes.append(roughen(rng, size) if size > 16 else size)
        remaining = max(1.0, remaining / sizes[-1])
    if last:
        sizes.append(last)
    return sizes


def elementwise_shape(
    rng: random.Random, scale: str, rank: int, budget: float = 1.0, last: int | None = None
) -> list[int]:
    """A memory-bound tensor's shape; `budget` shrinks the total when a problem has several big inputs."""
    low, high = ELEMENTWISE_NUMEL[scale]
    total = log_uniform(rng, max(16, low * budget), high * budget)
    shape = split(rng, total, rank, last)
    limit = max_numel(scale)
    while math.prod(shape) > limit:  # rounding can overshoot the scale's cap: shrink the largest axis
        axis = shape.index(max(shape))
        shape[axis] = max(1, shape[axis] * 3 // 4)
    return shape


def axis_shape(rng: random.Random, scale: str, rank: int, axis: int, length: int, budget: float = 1.0) -> list[int]:
    """A shape whose axis `axis` has `length` elements, for kernels that walk that axis.

    At cpu scale the axes before it hold at most 16 positions in all: the interpreter runs one Python
    program per position (per row), so few long rows are much faster than many short ones.
    """
    low, high = ELEMENTWISE_NUMEL[scale]
    total = log_uniform(rng, max(16, low * budget), high * budget)
    rest = max(1, total // length)
    after = rank - axis - 1
    if axis == 0:
        outer_total = 1
    elif scale == "cpu":
        outer_total = min(rest, log_uniform(rng, 2, 16))
    else:
        outer_total = max(1, int(rest ** (axis / (rank - 1)))) if after else rest
    inner_total = max(1, rest // outer_total)
    outer = split(rng, outer_total, axis) if axis else []
    shape = outer + [length] + (split(rng, inner_total, after) if after else [])
    limit = max_numel(scale)
    while math.prod(shape) > limit:
        index = shape.index(max(shape))
        shape[index] = max(1, shape[index] * 3 // 4)
    return shape


def row_length(rng: random.Random, scale: str, low_full: int = 256, high_full: int = 16384) -> int:
    """The length of rows processed whole (softmax, norms)."""
    if scale == "cpu":
        return roughen(rng, log_uniform(rng, 16, 512))
    return roughen(rng, log_uniform(rng, low_full, high_full))


def matmul_sizes(rng: random.Random, scale: str, dtype: str, batched: bool = False) -> tuple[int, int, int, int]:
    """(batch, M, N, K). cpu: every operand at most 4096 elements. full: enough flops to time
    (fp32 ~ 1e9, 16-bit ~ 1e10 multiply-adds: a few tens of microseconds on an H100)."""
    if scale == "cpu":
        batch = rng.randint(2, 4) if batched else 1
        while True:
            m, n, k = (roughen(rng, log_uniform(rng, 8, 64)) for _ in range(3))
            if batch * max(m * k, k * n, m * n) <= CPU_MAX_NUMEL:
                return batch, m, n, k
    floor = 1 << 29 if dtype == "float32" else 1 << 31
    while True:
        batch = rng.randint(4, 32) if batched else 1
        low, high = (256, 2048) if batched else (512, 4096)
        m, n, k = (roughen(rng, log_uniform(rng, low, high)) for _ in range(3))
        flops = batch * m * n * k
        if floor <= flops <= 64 * floor and batch * max(m * k, k * n, m * n) <= FULL_MAX_NUMEL:
            return batch, m, n, k
