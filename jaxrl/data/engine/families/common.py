"""Small helpers the family modules share: the primary input, parameter values, scalar names."""

from __future__ import annotations

import random

from jaxrl.data.engine.families.builder import Builder
from jaxrl.data.engine.ir import Distribution, Scalar
from jaxrl.data.engine.pointwise import pointwise

PRIMARY_NAMES = ("x", "inputs", "input_tensor", "data", "values", "activations")
PARAM_NAMES = {
    "negative_slope": ("negative_slope", "slope", "leak"),
    "alpha": ("alpha", "elu_alpha"),
    "min_val": ("min_val", "lower", "clamp_min", "low"),
    "max_val": ("max_val", "upper", "clamp_max", "high"),
    "lambd": ("lambd", "threshold_value", "shrink_lambda"),
}
SCALAR_NAMES = {
    "mul": ("scale_factor", "multiplier", "factor", "scaling"),
    "div": ("divisor", "divide_by", "denominator"),
    "add": ("bias_value", "offset", "add_value", "shift"),
    "sub": ("subtract_value", "sub_value", "offset_value"),
}
DESCRIPTIONS = {
    "relu": "ReLU", "leaky_relu": "LeakyReLU", "gelu": "GELU", "gelu_tanh": "GELU (tanh approximation)",
    "silu": "SiLU (Swish)", "sigmoid": "Sigmoid", "tanh": "Tanh", "softplus": "Softplus", "elu": "ELU", "selu": "SELU",
    "hardsigmoid": "HardSigmoid", "hardswish": "HardSwish", "mish": "Mish", "softsign": "Softsign",
    "clamp": "a clamp (HardTanh)", "exp": "an exponential", "log": "a natural logarithm", "square": "a square",
    "tanhshrink": "Tanhshrink", "softshrink": "Softshrink", "hardshrink": "Hardshrink", "logsigmoid": "LogSigmoid",
    "celu": "CELU", "relu6": "ReLU6",
}


def primary(b: Builder, dims: list[str | int], dist: Distribution, dtype: str | None = None, widen: bool = True) -> str:
    """The first forward input, usually called x."""
    rng = b.rng
    names = PRIMARY_NAMES if rng.random() < 0.7 else tuple(rng.sample(PRIMARY_NAMES, len(PRIMARY_NAMES)))
    return b.input(names, dims, dist, dtype, keep_order=True, widen=widen)


def op_params(b: Builder, op_name: str) -> tuple[tuple[str, Scalar], ...]:
    """Values for an operator's parameters (negative_slope, alpha, clamp bounds): init args or literals."""
    params = []
    for spec in pointwise(op_name).params:
        value = round(b.rng.uniform(spec.low, spec.high), 3)
        params.append((spec.name, b.scalar(PARAM_NAMES[spec.name], value)))
    return tuple(params)


def scalar_value(rng: random.Random, op: str) -> float:
    """A number that keeps `x <op> s` meaningful: no division by ~0, no multiplication by ~0."""
    if op == "mul":
        return round(rng.choice([-1, 1]) * rng.uniform(0.5, 3.0), 3)
    if op == "div":
        return round(rng.uniform(0.5, 4.0), 3)
    return round(rng.uniform(-2.0, 2.0) or 0.5, 3)


def input_std(rng: random.Random, op_name: str) -> float:
    """Spread of activation inputs: wide enough to reach the interesting parts of each curve."""
    if op_name in ("hardsigmoid", "hardswish", "clamp", "softsign"):
        return round(rng.uniform(2.0, 4.0), 2)
    return round(rng.uniform(1.0, 2.5), 2)
