"""The shared table from PyTorch elementwise operators to Triton expressions.

Each operator has a canonical name (the one `op_signature` reports), the ways a reference may spell it
(functions, methods, `nn` modules) and the Triton statements that compute it on a float32 register
value. The reference writer and the teacher read the same entry, so a solution is the reference
translated piece by piece: a model can learn the mapping instead of memorising one text per family.

Placeholders: `{x}` is the value (in references an expression, in kernels a variable name), parameter
names (`{negative_slope}`) are numbers or names, and `{t}` is a fresh temporary in a kernel.

`expressions` write the same math with explicit PyTorch arithmetic (`x * torch.sigmoid(x)` for SiLU), in
its numerically safe form, so that references come in both spellings and a model learns the math rather
than a name; `math` states the formula and `safe` how it is computed without overflow, for the teacher's
plans. `EVAL_ONLY_OPS` are operators no family trains: evaluation set B spells them as expressions and
set C by name (`jaxrl.data.engine.evalsets`).
"""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class ParamRange:
    """A numeric parameter of an operator and the range its values are drawn from."""

    name: str
    low: float
    high: float


@dataclasses.dataclass(frozen=True)
class PointwiseOp:
    name: str
    functions: tuple[str, ...]  # function or method spellings, `{x}` the input
    modules: tuple[str, ...]  # nn module constructors (called on the input in forward)
    triton: tuple[str, ...]  # kernel statements on the float32 variable `{x}`
    params: tuple[ParamRange, ...] = ()
    positive_input: bool = False  # only defined (or only sensible) for positive inputs
    expressions: tuple[str, ...] = ()  # the same math in explicit PyTorch arithmetic
    math: str = ""  # the formula, for plans
    safe: str = ""  # how the kernel computes it safely, for plans

    def spellings(self, modules: bool = True) -> tuple[str, ...]:
        return self.functions + (self.modules if modules else ())


def _op(name, functions, modules, triton, params=(), positive_input=False) -> PointwiseOp:
    return PointwiseOp(name, tuple(functions), tuple(modules), tuple(triton), tuple(params), positive_input,
                       EXPRESSIONS.get(name, ()), *MATH.get(name, ("", "")))


# Explicit PyTorch forms of each operator (the value as `{x}`, always parenthesised by the writer).
_SOFTPLUS_EXPR = "(torch.clamp({x}, min=0.0) + torch.log1p(torch.exp(-torch.abs({x}))))"
EXPRESSIONS: dict[str, tuple[str, ...]] = {
    "relu": ("torch.where({x} > 0, {x}, torch.zeros_like({x}))", "torch.maximum({x}, torch.zeros_like({x}))"),
    "leaky_relu": ("torch.where({x} >= 0, {x}, {x} * {negative_slope})",),
    "gelu": ("0.5 * {x} * (1.0 + torch.erf({x} * 0.7071067811865476))",),
    "gelu_tanh": ("0.5 * {x} * (1.0 + torch.tanh(0.7978845608028654 * ({x} + 0.044715 * {x} * {x} * {x})))",),
    "silu": ("{x} * torch.sigmoid({x})", "{x} / (1.0 + torch.exp(-{x}))"),
    "sigmoid": ("1.0 / (1.0 + torch.exp(-{x}))",),
    "tanh": ("2.0 * torch.sigmoid(2.0 * {x}) - 1.0",),
    "softplus": (_SOFTPLUS_EXPR,),
    "elu": ("torch.where({x} > 0, {x}, {alpha} * torch.expm1({x}))",),
    "selu": ("1.0507009873554805 * torch.where({x} > 0, {x}, 1.6732632423543772 * torch.expm1({x}))",),
    "hardsigmoid": ("torch.clamp({x} / 6.0 + 0.5, 0.0, 1.0)",),
    "hardswish": ("{x} * torch.clamp({x} + 3.0, 0.0, 6.0) / 6.0",),
    "mish": ("{x} * torch.tanh(" + _SOFTPLUS_EXPR + ")",),
    "softsign": ("{x} / (1.0 + torch.abs({x}))",),
    "tanhshrink": ("{x} - torch.tanh({x})",),
    "softshrink": ("torch.where({x} > {lambd}, {x} - {lambd}, torch.where({x} < -{lambd}, {x} + {lambd}, "
                   "torch.zeros_like({x})))",),
    "hardshrink": ("torch.where(torch.abs({x}) > {lambd}, {x}, torch.zeros_like({x}))",),
    "logsigmoid": ("-(torch.clamp(-{x}, min=0.0) + torch.log1p(torch.exp(-torch.abs({x}))))",),
    "celu": ("torch.where({x} > 0, {x}, {alpha} * torch.expm1({x} / {alpha}))",),
    "relu6": ("torch.clamp({x}, 0.0, 6.0)",),
}
# (formula, numerically safe form in the kernel) per operator.
MATH: dict[str, tuple[str, str]] = {
    "relu": ("relu(x) = max(x, 0)", "one tl.maximum"),
    "leaky_relu": ("leaky_relu(x) = x if x >= 0 else slope * x", "a tl.where, no special values"),
    "gelu": ("gelu(x) = 0.5 x (1 + erf(x / sqrt(2)))", "tl.erf in fp32"),
    "gelu_tanh": ("gelu_tanh(x) = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))",
                  "0.5 (1 + tanh(z)) = sigmoid(2z), so x * sigmoid(2z) needs no tanh"),
    "silu": ("silu(x) = x * sigmoid(x)", "tl.sigmoid is safe for any x"),
    "sigmoid": ("sigmoid(x) = 1 / (1 + exp(-x))", "tl.sigmoid, safe for any x"),
    "tanh": ("tanh(x) = (e^x - e^-x) / (e^x + e^-x)", "tanh(x) = 2 sigmoid(2x) - 1, which never overflows"),
    "softplus": ("softplus(x) = log(1 + exp(x))", "x above 20 (PyTorch's threshold), else log(1 + exp(min(x, 20)))"),
    "elu": ("elu(x) = x if x > 0 else alpha (exp(x) - 1)", "exp of min(x, 0), so the unused branch cannot overflow"),
    "selu": ("selu(x) = 1.0507 * (x if x > 0 else 1.6733 (exp(x) - 1))", "exp of min(x, 0)"),
    "hardsigmoid": ("hardsigmoid(x) = clamp(x / 6 + 1/2, 0, 1)", "two comparisons"),
    "hardswish": ("hardswish(x) = x * clamp(x + 3, 0, 6) / 6", "two comparisons and a product"),
    "mish": ("mish(x) = x * tanh(softplus(x))", "softplus with the threshold, tanh as 2 sigmoid(2s) - 1"),
    "softsign": ("softsign(x) = x / (1 + |x|)", "the denominator is at least 1"),
    "clamp": ("clamp(x, lo, hi) = min(max(x, lo), hi)", "two comparisons"),
    "exp": ("exp(x)", "in fp32, cast back at the store"),
    "log": ("log(x) for x > 0", "in fp32"),
    "sqrt": ("sqrt(x) for x >= 0", "in fp32"),
    "abs": ("|x|", "tl.abs"),
    "square": ("x^2 = x * x", "one product"),
    "tanhshrink": ("tanhshrink(x) = x - tanh(x)", "tanh as 2 sigmoid(2x) - 1"),
    "softshrink": ("softshrink(x) = x - l if x > l, x + l if x < -l, else 0", "two tl.where"),
    "hardshrink": ("hardshrink(x) = x if |x| > l else 0", "one tl.where"),
    "logsigmoid": ("logsigmoid(x) = log(sigmoid(x)) = -softplus(-x)", "-(max(-x, 0) + log(1 + exp(-|x|)))"),
    "celu": ("celu(x) = x if x > 0 else alpha (exp(x / alpha) - 1)", "exp of min(x, 0) / alpha"),
    "relu6": ("relu6(x) = min(max(x, 0), 6)", "two comparisons"),
}


# tanh(z) = 2 * sigmoid(2z) - 1: Triton has no tanh in `tl`, and this form is exact enough in fp32.
_TANH = "(2.0 * tl.sigmoid(2.0 * {v}) - 1.0)"
# softplus with PyTorch's threshold of 20 (linear above it); the minimum keeps exp from overflowing.
_SOFTPLUS = "tl.where({v} > 20.0, {v}, tl.log(1.0 + tl.exp(tl.minimum({v}, 20.0))))"

POINTWISE: dict[str, PointwiseOp] = {
    op.name: op
    for op in (
        _op(
            "relu",
            ["torch.relu({x})", "F.relu({x})", "{x}.relu()", "torch.clamp({x}, min=0)", "{x}.clamp(min=0.0)"],
            ["nn.ReLU()"],
            ["{x} = tl.maximum({x}, 0.0)"],
        ),
        _op(
            "leaky_relu",
            ["F.leaky_relu({x}, {negative_slope})", "F.leaky_relu({x}, negative_slope={negative_slope})",
             "torch.nn.functional.leaky_relu({x}, {negative_slope})"],
            ["nn.LeakyReLU({negative_slope})", "nn.LeakyReLU(negative_slope={negative_slope})"],
            ["{x} = tl.where({x} >= 0.0, {x}, {x} * {negative_slope})"],
            [ParamRange("negative_slope", 0.01, 0.3)],
        ),
        _op(
            "gelu",
            ["F.gelu({x})", "torch.nn.functional.gelu({x})", "F.gelu({x}, approximate='none')"],
            ["nn.GELU()"],
            ["{x} = 0.5 * {x} * (1.0 + tl.erf({x} * 0.7071067811865476))"],
        ),
        _op(
            "gelu_tanh",
            ["F.gelu({x}, approximate='tanh')", "torch.nn.functional.gelu({x}, approximate=\"tanh\")"],
            ["nn.GELU(approximate='tanh')"],
            # 0.5 * (1 + tanh(z)) == sigmoid(2z), with z = sqrt(2/pi) * (x + 0.044715 x^3)
            ["{x} = {x} * tl.sigmoid(1.5957691216057308 * ({x} + 0.044715 * {x} * {x} * {x}))"],
        ),
        _op(
            "silu",
            ["F.silu({x})", "torch.nn.functional.silu({x})"],
            ["nn.SiLU()"],
            ["{x} = {x} * tl.sigmoid({x})"],
        ),
        _op(
            "sigmoid",
            ["torch.sigmoid({x})", "{x}.sigmoid()", "F.sigmoid({x})"],
            ["nn.Sigmoid()"],
            ["{x} = tl.sigmoid({x})"],
        ),
        _op(
            "tanh",
            ["torch.tanh({x})", "{x}.tanh()", "F.tanh({x})"],
            ["nn.Tanh()"],
            ["{x} = " + _TANH.format(v="{x}")],
        ),
        _op(
            "softplus",
            ["F.softplus({x})", "torch.nn.functional.softplus({x})"],
            ["nn.Softplus()"],
            ["{x} = " + _SOFTPLUS.format(v="{x}")],
        ),
        _op(
            "elu",
            ["F.elu({x}, alpha={alpha})", "F.elu({x}, {alpha})"],
            ["nn.ELU(alpha={alpha})", "nn.ELU({alpha})"],
            ["{x} = tl.where({x} > 0.0, {x}, {alpha} * (tl.exp(tl.minimum({x}, 0.0)) - 1.0))"],
            [ParamRange("alpha", 0.5, 1.5)],
        ),
        _op(
            "selu",
            ["torch.selu({x})", "F.selu({x})"],
            ["nn.SELU()"],
            ["{x} = 1.0507009873554805 * tl.where({x} > 0.0, {x}, "
             "1.6732632423543772 * (tl.exp(tl.minimum({x}, 0.0)) - 1.0))"],
        ),
        _op(
            "hardsigmoid",
            ["F.hardsigmoid({x})", "torch.nn.functional.hardsigmoid({x})"],
            ["nn.Hardsigmoid()"],
            ["{x} = tl.minimum(tl.maximum({x} / 6.0 + 0.5, 0.0), 1.0)"],
        ),
        _op(
            "hardswish",
            ["F.hardswish({x})", "torch.nn.functional.hardswish({x})"],
            ["nn.Hardswish()"],
            ["{x} = {x} * tl.minimum(tl.maximum({x} / 6.0 + 0.5, 0.0), 1.0)"],
        ),
        _op(
            "mish",
            ["F.mish({x})", "torch.nn.functional.mish({x})"],
            ["nn.Mish()"],
            ["{t} = " + _SOFTPLUS.format(v="{x}"), "{x} = {x} * " + _TANH.format(v="{t}")],
        ),
        _op(
            "softsign",
            ["F.softsign({x})", "torch.nn.functional.softsign({x})"],
            ["nn.Softsign()"],
            ["{x} = {x} / (1.0 + tl.abs({x}))"],
        ),
        _op(
            "clamp",
            ["torch.clamp({x}, {min_val}, {max_val})", "torch.clamp({x}, min={min_val}, max={max_val})",
             "{x}.clamp({min_val}, {max_val})", "F.hardtanh({x}, {min_val}, {max_val})",
             "F.hardtanh({x}, min_val={min_val}, max_val={max_val})", "torch.clip({x}, {min_val}, {max_val})"],
            ["nn.Hardtanh({min_val}, {max_val})", "nn.Hardtanh(min_val={min_val}, max_val={max_val})"],
            ["{x} = tl.minimum(tl.maximum({x}, {min_val}), {max_val})"],
            [ParamRange("min_val", -1.5, -0.25), ParamRange("max_val", 0.25, 1.5)],
        ),
        _op(
            "exp",
            ["torch.exp({x})", "{x}.exp()"],
            [],
            ["{x} = tl.exp({x})"],
        ),
        _op(
            "log",
            ["torch.log({x})", "{x}.log()"],
            [],
            ["{x} = tl.log({x})"],
            positive_input=True,
        ),
        _op(
            "sqrt",
            ["torch.sqrt({x})", "{x}.sqrt()"],
            [],
            ["{x} = tl.sqrt({x})"],
            positive_input=True,
        ),
        _op(
            "abs",
            ["torch.abs({x})", "{x}.abs()"],
            [],
            ["{x} = tl.abs({x})"],
        ),
        _op(
            "square",
            ["torch.square({x})", "{x} ** 2", "{x}.pow(2)", "torch.pow({x}, 2)"],
            [],
            ["{x} = {x} * {x}"],
        ),
        # Evaluation-only operators (EVAL_ONLY_OPS): no family draws them.
        _op("tanhshrink", ["F.tanhshrink({x})"], ["nn.Tanhshrink()"], ["{x} = {x} - " + _TANH.format(v="{x}")]),
        _op("softshrink", ["F.softshrink({x}, {lambd})", "F.softshrink({x}, lambd={lambd})"],
            ["nn.Softshrink({lambd})"],
            ["{x} = tl.where({x} > {lambd}, {x} - {lambd}, tl.where({x} < -{lambd}, {x} + {lambd}, 0.0))"],
            [ParamRange("lambd", 0.3, 0.7)]),
        _op("hardshrink", ["F.hardshrink({x}, {lambd})", "F.hardshrink({x}, lambd={lambd})"],
            ["nn.Hardshrink({lambd})"], ["{x} = tl.where(tl.abs({x}) > {lambd}, {x}, 0.0)"],
            [ParamRange("lambd", 0.3, 0.7)]),
        _op("logsigmoid", ["F.logsigmoid({x})"], ["nn.LogSigmoid()"],
            ["{x} = -(tl.maximum(-{x}, 0.0) + tl.log(1.0 + tl.exp(-tl.abs({x}))))"]),
        _op("celu", ["F.celu({x}, alpha={alpha})", "F.celu({x}, {alpha})"], ["nn.CELU(alpha={alpha})"],
            ["{x} = tl.where({x} > 0.0, {x}, {alpha} * (tl.exp(tl.minimum({x}, 0.0) / {alpha}) - 1.0))"],
            [ParamRange("alpha", 0.5, 1.5)]),
        _op("relu6", ["F.relu6({x})"], ["nn.ReLU6()"], ["{x} = tl.minimum(tl.maximum({x}, 0.0), 6.0)"]),
    )
}
EVAL_ONLY_OPS = ("tanhshrink", "softshrink", "hardshrink", "logsigmoid", "celu", "relu6")

# Binary arithmetic: torch spellings with `{x}` the running value and `{y}` the other operand.
ARITH_SYMBOLS = {"add": "+", "sub": "-", "mul": "*", "div": "/"}
ARITH_FUNCTIONS = {
    "add": ("torch.add({x}, {y})", "{x}.add({y})"),
    "sub": ("torch.sub({x}, {y})", "{x}.sub({y})"),
    "mul": ("torch.mul({x}, {y})", "{x}.mul({y})"),
    "div": ("torch.div({x}, {y})", "{x}.div({y})"),
}


def pointwise(name: str) -> PointwiseOp:
    try:
        return POINTWISE[name]
    except KeyError:
        raise KeyError(f"unknown pointwise op {name!r}; known: {sorted(POINTWISE)}") from None
