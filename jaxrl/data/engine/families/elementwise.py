"""Elementwise families: activations, unary math, arithmetic with scalars and broadcast tensors."""

from __future__ import annotations

import dataclasses
import random

from jaxrl.data.engine.families.base import Draw, Family, Recipe, SingleOpFamily
from jaxrl.data.engine.families.builder import Builder
from jaxrl.data.engine.families.common import (
    DESCRIPTIONS,
    SCALAR_NAMES,
    input_std,
    op_params,
    primary,
    scalar_value,
)
from jaxrl.data.engine.families.sizes import elementwise_shape, pick_dtype
from jaxrl.data.engine.ir import Arith, Distribution, Normal, Operand, Pointwise, Uniform

ACTIVATIONS = ("relu", "leaky_relu", "gelu", "gelu_tanh", "silu", "sigmoid", "tanh", "softplus", "elu", "selu",
               "hardsigmoid", "hardswish", "mish", "softsign", "clamp")
UNARY_MATH = ("exp", "log", "square")


def _value_shape(b: Builder, scale: str, budget: float = 1.0) -> list[str]:
    rank = b.rng.choice([2, 2, 3, 4])
    dims = b.dims_for(elementwise_shape(b.rng, scale, rank, budget))
    b.shape = list(dims)
    return dims


@dataclasses.dataclass
class ActivationFamily(SingleOpFamily):
    """One activation on a tensor of rank 2-4 (the KernelBench level-1 activations and more)."""

    op: str
    category: str = "activation"
    difficulties: tuple[str, ...] = ("easy",)

    def draw(self, rng: random.Random, scale: str, recipe: Recipe | None = None) -> Draw:
        b = Builder(rng, pick_dtype(rng, scale))
        dims = _value_shape(b, scale)
        primary(b, dims, Normal(std=input_std(rng, self.op)))
        b.stage(Pointwise(self.op, op_params(b, self.op)))
        return Draw(b.build(f"applies {DESCRIPTIONS[self.op]}"), "easy", {})


@dataclasses.dataclass
class UnaryMathFamily(SingleOpFamily):
    """exp, log (on positive inputs), square."""

    op: str
    category: str = "elementwise"
    difficulties: tuple[str, ...] = ("easy",)

    def draw(self, rng: random.Random, scale: str, recipe: Recipe | None = None) -> Draw:
        b = Builder(rng, pick_dtype(rng, scale))
        dims = _value_shape(b, scale)
        if self.op == "log":
            dist: Distribution = Uniform(0.05, round(rng.uniform(2.0, 6.0), 2))
        else:
            dist = Normal(std=round(rng.uniform(0.5, 1.5), 2))
        primary(b, dims, dist, widen=self.op != "exp")  # a wider exp input overflows fp16
        b.stage(Pointwise(self.op))
        return Draw(b.build(f"computes {DESCRIPTIONS[self.op]} of every element"), "easy", {})


def broadcast_dims(rng: random.Random, dims: list[str], weight: bool = False) -> tuple[tuple[str | int, ...], str]:
    """A shape broadcastable to `dims` over one contiguous range of axes (or all of them), and its name.
    A weight never spans the first (batch) axis: its size is fixed, and input sets must vary some size."""
    rank = len(dims)
    if rng.random() < 0.3 and not weight:
        return tuple(dims), "full"
    first = 1 if weight else 0
    spans = [(s, e) for s in range(first, rank) for e in range(s + 1, rank + 1) if (s, e) != (0, rank)]
    start, stop = (rank - 1, rank) if rng.random() < 0.4 else rng.choice(spans)
    shape = tuple(dims[start:stop]) + (1,) * (rank - stop)
    return shape, "last axis" if (start, stop) == (rank - 1, rank) else f"axes {start}..{stop - 1}"


OTHER_NAMES = ("y", "other", "b_tensor", "operand", "weights")
VERBS = {"add": "adds", "sub": "subtracts", "mul": "multiplies by", "div": "divides by"}


@dataclasses.dataclass
class ArithmeticFamily(SingleOpFamily):
    """x <op> other, with other a scalar, a same-shape tensor or a broadcast tensor (input or parameter)."""

    op: str
    category: str = "arithmetic"
    difficulties: tuple[str, ...] = ("easy", "medium")

    def draw(self, rng: random.Random, scale: str, recipe: Recipe | None = None) -> Draw:
        b = Builder(rng, pick_dtype(rng, scale))
        dims = _value_shape(b, scale, budget=0.5)
        reverse = rng.random() < 0.3  # other <op> x
        positive = Uniform(0.5, round(rng.uniform(1.5, 3.0), 2))
        x_dist = positive if self.op == "div" and reverse else Normal(std=round(rng.uniform(0.5, 2.0), 2))
        primary(b, dims, x_dist)
        kind = rng.choice(["scalar", "tensor", "tensor"])
        if kind == "scalar":
            other = b.scalar(SCALAR_NAMES[self.op], scalar_value(rng, self.op))
            described, difficulty = "a scalar", "easy"
        else:
            weight = rng.random() < 0.5
            shape, described = broadcast_dims(rng, dims, weight)
            other_dist = positive if self.op == "div" and not reverse else Normal()
            if not weight:
                name = b.input(OTHER_NAMES, list(shape), other_dist)
                other = Operand(name, "input", b.axes_of(shape))
            else:
                mean = 1.5 if self.op == "div" else 0.0  # a divisor away from 0
                other = b.param(("bias", "weight", "scale", "offset"), shape, std=0.5, mean=mean)
            difficulty = "easy" if described == "full" else "medium"
            described = f"a tensor ({described})"
        b.stage(Arith(self.op, other, reverse))
        return Draw(b.build(f"{VERBS[self.op]} {described}"), difficulty, {"operand": described, "reverse": reverse})


@dataclasses.dataclass
class ScaleBiasFamily(Family):
    """x * scale + bias with scalars or per-feature vectors."""

    name: str = "scale_bias"
    category: str = "arithmetic"
    difficulties: tuple[str, ...] = ("easy", "medium")

    @property
    def ops(self) -> tuple[str, ...]:
        return ("mul", "add")

    def draw(self, rng: random.Random, scale: str, recipe: Recipe | None = None) -> Draw:
        b = Builder(rng, pick_dtype(rng, scale))
        dims = _value_shape(b, scale)
        primary(b, dims, Normal(std=round(rng.uniform(0.5, 2.0), 2)))
        if rng.random() < 0.5:
            weight = b.scalar(SCALAR_NAMES["mul"], scalar_value(rng, "mul"))
            bias = b.scalar(SCALAR_NAMES["add"], scalar_value(rng, "add"))
            kind, difficulty = "scalars", "easy"
        else:
            shape = (dims[-1],) if rng.random() < 0.6 else broadcast_dims(rng, dims, weight=True)[0]
            weight = b.param(("weight", "gamma", "scale"), shape, std=0.5, mean=1.0)
            bias = b.param(("bias", "beta", "shift"), shape, std=0.5)
            kind, difficulty = "vectors", "medium"
        b.stage(Arith("mul", weight))
        b.stage(Arith("add", bias))
        what = f"scales and shifts its input (x * weight + bias with {kind})"
        return Draw(b.build(what), difficulty, {"operand": kind})


def elementwise_families() -> list[Family]:
    return ([ActivationFamily(op) for op in ACTIVATIONS] + [UnaryMathFamily(op) for op in UNARY_MATH]
            + [ArithmeticFamily(op) for op in ("add", "sub", "mul", "div")] + [ScaleBiasFamily()])
