"""Reductions over one axis: sum, mean, max, min, argmax, argmin, L2 norm, logsumexp, variance, standard
deviation; and the scans (cumsum, cumprod, cummax, cummin, logcumsumexp). The axis is the last one about
half the time (a row kernel) and another one otherwise (a strided kernel). Variance, standard deviation,
cummin and logcumsumexp have no teacher template: the data engine asks TorchInductor for their solutions."""

from __future__ import annotations

import dataclasses
import random

from jaxrl.data.engine.families.base import Draw, Family, Recipe, SingleOpFamily
from jaxrl.data.engine.families.builder import Builder
from jaxrl.data.engine.families.common import primary
from jaxrl.data.engine.families.sizes import axis_shape, log_uniform, pick_dtype, roughen, row_length
from jaxrl.data.engine.ir import Distribution, Normal, Reduce, Scalar, Scan, Uniform

REDUCE_KINDS = {
    "sum_reduce": "sum", "mean_reduce": "mean", "max_reduce": "max", "min_reduce": "min", "argmax": "argmax",
    "argmin": "argmin", "l2_norm": "norm", "logsumexp": "logsumexp", "var_reduce": "var", "std_reduce": "std",
}
REDUCE_WORDS = {"sum": "sums", "mean": "averages", "max": "takes the maximum", "min": "takes the minimum",
                "argmax": "finds the index of the maximum", "argmin": "finds the index of the minimum",
                "norm": "computes the L2 norm", "logsumexp": "computes the log-sum-exp",
                "var": "computes the variance", "std": "computes the standard deviation"}
DIM_NAMES = ("dim", "reduce_dim", "axis", "reduction_dim")


def reduced_axis(b: Builder, scale: str, rank: int, last_probability: float = 0.55,
                 full_row: tuple[int, int] = (256, 32768), budget: float = 1.0) -> tuple[list[str], int, bool]:
    """Dims of the input and the axis to reduce (or scan); the last axis gets a row-like length."""
    rng = b.rng
    last = rng.random() < last_probability
    if last:
        axis, length = rank - 1, row_length(rng, scale, *full_row)
    else:
        axis = rng.randrange(0, rank - 1)
        length = log_uniform(rng, 4, 64) if scale == "cpu" else log_uniform(rng, 32, min(full_row[1], 2048))
    dims = b.dims_for(axis_shape(rng, scale, rank, axis, roughen(rng, length), budget))
    b.shape = list(dims)
    return dims, axis, last


def axis_value(b: Builder, axis: int, rank: int) -> Scalar:
    """The axis as written: -1 or rank-1 for the last one; an __init__ argument (KernelBench style) or a literal."""
    value = -1 if axis == rank - 1 and b.rng.random() < 0.5 else axis
    return b.init_int(DIM_NAMES, value) if b.rng.random() < 0.5 else Scalar(value)


@dataclasses.dataclass
class ReductionFamily(Family):
    name: str
    category: str = "reduction"
    difficulties: tuple[str, ...] = ("medium", "hard")

    @property
    def kind(self) -> str:
        return REDUCE_KINDS[self.name]

    @property
    def ops(self) -> tuple[str, ...]:
        return (self.kind,)

    def draw(self, rng: random.Random, scale: str, recipe: Recipe | None = None) -> Draw:
        b = Builder(rng, pick_dtype(rng, scale))
        rank = rng.choice([2, 3, 3, 4])
        dims, axis, last = reduced_axis(b, scale, rank)
        # A shift constant along the reduced axis makes results differ between positions (a mean of many
        # standard normals alone is ~0 everywhere: any constant would pass).
        shifted = self.kind in ("mean", "max", "min", "logsumexp")
        # The spread of long rows is about the same at every position: jitter makes it differ between calls.
        spread = self.kind in ("var", "std")
        primary(b, dims, Normal(std=round(rng.uniform(0.5, 2.0), 2), shift_axis=axis if shifted else None,
                                jitter=spread))
        keepdim = rng.random() < 0.3
        b.stage(Reduce(self.kind, axis_value(b, axis, rank), keepdim))
        what = f"{REDUCE_WORDS[self.kind]} over dimension {axis}" + (" (keepdim)" if keepdim else "")
        return Draw(b.build(what), "medium" if last else "hard", {"axis": axis, "keepdim": keepdim})


SCAN_WORDS = {"cumsum": "cumulative sum", "cumprod": "cumulative product", "cummax": "running maximum",
              "cummin": "running minimum", "logcumsumexp": "running log-sum-exp"}
SCAN_KINDS = ("cumsum", "cumprod", "cummax", "cummin", "logcumsumexp")


@dataclasses.dataclass
class ScanFamily(SingleOpFamily):
    op: str
    category: str = "scan"
    difficulties: tuple[str, ...] = ("medium", "hard")

    def draw(self, rng: random.Random, scale: str, recipe: Recipe | None = None) -> Draw:
        # Long fp16 prefix sums and products lose too much precision in the reference itself.
        dtype = pick_dtype(rng, scale) if self.op in ("cummax", "cummin") else (
            rng.choice(["float32", "float16"]) if scale == "cpu" else "float32")
        b = Builder(rng, dtype)
        rank = rng.choice([2, 2, 3])
        dims, axis, last = reduced_axis(b, scale, rank, 0.6, full_row=(256, 2048))
        # products of values near 1 neither vanish nor overflow over thousands of steps
        near_one = self.op == "cumprod"
        dist: Distribution = Uniform(0.97, 1.03) if near_one else Normal(std=round(rng.uniform(0.5, 2.0), 2))
        primary(b, dims, dist)
        b.stage(Scan(self.op, axis_value(b, axis, rank)))
        return Draw(b.build(f"computes the {SCAN_WORDS[self.op]} along dimension {axis}"),
                    "medium" if last else "hard", {"axis": axis})


def reduction_families() -> list[Family]:
    return [ReductionFamily(name) for name in REDUCE_KINDS] + [ScanFamily(k) for k in SCAN_KINDS]
