"""Softmax and log-softmax (over the last axis or another one), layer norm and RMS norm (with weights)."""

from __future__ import annotations

import dataclasses
import random

from jaxrl.data.engine.families.base import Draw, Family, Recipe, SingleOpFamily
from jaxrl.data.engine.families.builder import Builder
from jaxrl.data.engine.families.common import primary
from jaxrl.data.engine.families.reductions import axis_value, reduced_axis
from jaxrl.data.engine.families.sizes import axis_shape, pick_dtype, row_length
from jaxrl.data.engine.ir import Norm, Normal, Softmax


@dataclasses.dataclass
class SoftmaxFamily(Family):
    log: bool
    category: str = "normalization"
    difficulties: tuple[str, ...] = ("medium", "hard")

    @property
    def name(self) -> str:
        return "log_softmax" if self.log else "softmax"

    @property
    def ops(self) -> tuple[str, ...]:
        return (self.name,)

    def draw(self, rng: random.Random, scale: str, recipe: Recipe | None = None) -> Draw:
        b = Builder(rng, pick_dtype(rng, scale))
        rank = rng.choice([2, 2, 3, 4])
        dims, axis, last = reduced_axis(b, scale, rank, 0.7, full_row=(256, 16384))
        # Wide logits: with long rows of standard normals every probability is below the tolerance.
        primary(b, dims, Normal(std=round(rng.uniform(2.0, 4.0), 2)))
        b.stage(Softmax(axis_value(b, axis, rank), self.log))
        what = f"applies {'log-' if self.log else ''}softmax over dimension {axis}"
        return Draw(b.build(what), "medium" if last else "hard", {"axis": axis})


NORM_WORDS = {"layer_norm": "layer normalization", "rms_norm": "RMS normalization"}


@dataclasses.dataclass
class NormFamily(SingleOpFamily):
    """nn.LayerNorm / nn.RMSNorm modules (default weights), or F.layer_norm / F.rms_norm with random weights."""

    op: str
    category: str = "normalization"
    difficulties: tuple[str, ...] = ("medium",)

    def draw(self, rng: random.Random, scale: str, recipe: Recipe | None = None) -> Draw:
        b = Builder(rng, pick_dtype(rng, scale))
        add_norm(b, scale, self.op, rng.choice([2, 2, 3, 4]), head=True)
        return Draw(b.build(f"applies {NORM_WORDS[self.op]} over the trailing dimensions"), "medium", {})


def add_norm(b: Builder, scale: str, kind: str, rank: int, head: bool, axes: int | None = None) -> None:
    """Append a norm over the last one or two axes (`axes`; None: drawn) of the running value
    (`head`: create the input first)."""
    rng = b.rng
    two = axes == 2 or axes is None and rank >= 3 and rng.random() < 0.25
    if head:
        width = row_length(rng, scale, 256, 8192)
        if two:
            inner = rng.choice([4, 8, 16]) if scale == "cpu" else rng.choice([16, 32, 64])
            shape = axis_shape(rng, scale, rank - 1, rank - 2, max(2, width // inner), budget=1 / inner) + [inner]
        else:
            shape = axis_shape(rng, scale, rank, rank - 1, width)
        dims = b.dims_for(shape)
        b.shape = list(dims)
        primary(b, dims, Normal(mean=round(rng.uniform(-1.0, 1.0), 2), std=round(rng.uniform(0.5, 3.0), 2)))
    norm_dims = tuple(b.shape[-2:] if two else b.shape[-1:])
    if len(norm_dims) == 1 and rng.random() < 0.6:
        shape_arg = b.init_dim(norm_dims[0])
    else:
        shape_arg = b.init_shape(("normalized_shape", "norm_shape", "features_shape"), norm_dims)
    eps = rng.choice([1e-5, 1e-6, 1e-5])
    if rng.random() < 0.5:
        names = ("norm", "ln", "layer_norm", "norm_layer") if kind == "layer_norm" else ("norm", "rms", "rms_norm")
        attr = b.name(names)
        b.stage(Norm(kind, attr, norm_dims, shape_arg, eps, module=True))
        return
    weight = b.param_from(("weight", "gamma", "norm_weight"), norm_dims, shape_arg, std=0.1, mean=1.0)
    bias = b.param_from(("bias", "beta", "norm_bias"), norm_dims, shape_arg, std=0.1) if kind == "layer_norm" else None
    b.stage(Norm(kind, weight, norm_dims, shape_arg, eps, module=False, weight_attr=weight, bias_attr=bias))


def normalization_families() -> list[Family]:
    return [SoftmaxFamily(False), SoftmaxFamily(True), NormFamily("layer_norm"), NormFamily("rms_norm")]
