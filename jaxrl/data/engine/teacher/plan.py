"""The teacher's plan: the math of every operator, the decisions the code follows, and the memory traffic.

A plan is written before the code and the code follows it: the same strategy (`emitter.Scale`) that the
kernel writers read decides the sentences about layout, block sizes, warps, tile order and fusion, so two
tasks solved with different strategies get different plans and different code. The math comes from one
table per operator (`pointwise.MATH` and `CORE_MATH` below): the formula and the numerically safe form
the kernel computes. Three phrasings (prose, sections, bullets) are drawn per task, so no one sentence
ends every plan.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence

from jaxrl.data.engine.ir import InitArg, Linear, Program
from jaxrl.data.engine.pointwise import POINTWISE
from jaxrl.data.engine.teacher.emitter import Scale

CORE_MATH: dict[str, tuple[str, str]] = {
    "add": ("x + y (y broadcast to x's shape)", "one add per element"),
    "sub": ("x - y (broadcast)", "one subtraction per element"),
    "mul": ("x * y (broadcast)", "one product per element"),
    "div": ("x / y (broadcast)", "one division per element, in fp32"),
    "matmul": ("C[i, j] = sum_k A[i, k] B[k, j]", "tl.dot on tiles with an fp32 accumulator"),
    "softmax": ("softmax(x)_i = exp(x_i) / sum_j exp(x_j)", "subtract the row max m first: exp(x_i - m) <= 1 never "
                "overflows"),
    "log_softmax": ("log_softmax(x)_i = x_i - log sum_j exp(x_j)", "x_i - m - log sum_j exp(x_j - m), m the row max"),
    "layer_norm": ("layer_norm(x) = (x - mean) / sqrt(var + eps) * w + b over the normalized axes, var biased",
                   "mean first, then the variance of (x - mean): no catastrophic cancellation"),
    "rms_norm": ("rms_norm(x) = x / sqrt(mean(x^2) + eps) * w", "the mean of squares in fp32"),
    "sum": ("sum over the axis", "an fp32 accumulator"),
    "mean": ("sum over the axis / its length", "an fp32 accumulator, one division at the end"),
    "max": ("the largest element along the axis", "a running maximum from -inf"),
    "min": ("the smallest element along the axis", "a running minimum from +inf"),
    "argmax": ("the index of the first largest element", "running (value, index) pairs, ties to the lower index"),
    "argmin": ("the index of the first smallest element", "running (value, index) pairs, ties to the lower index"),
    "norm": ("||x||_2 = sqrt(sum x^2)", "sum of squares in fp32, one sqrt"),
    "logsumexp": ("log sum exp(x)", "m + log sum exp(x - m), m the max: no overflow"),
    "cumsum": ("y_i = x_0 + ... + x_i", "an associative scan (tl.cumsum) with a carry between chunks"),
    "cumprod": ("y_i = x_0 * ... * x_i", "an associative scan with a multiplying combiner"),
    "cummax": ("y_i = max(x_0, ..., x_i)", "an associative scan with tl.maximum"),
    "transpose": ("out[j, i] = x[i, j]", "no arithmetic: read through the strides, write contiguously"),
    "permute": ("out = x with its axes reordered", "no arithmetic: each output element reads its source offset"),
    "contiguous": ("a dense copy", "folded into the kernel's contiguous store"),
    "cat": ("out = [x | others] along the axis", "no arithmetic: each output element reads from its source"),
    "index_select": ("out[..., i, ...] = x[..., index[i], ...]", "the index is loaded, then the element"),
    "gather": ("out[i][j] = x[i][index[i][j]]", "the index is loaded, then the element"),
    "cosine_similarity": ("x . y / max(||x|| ||y||, eps)", "three fp32 sums over the row, one division"),
    "mse_loss": ("mean((p - t)^2)", "squared differences summed in fp32 partial sums, fixed order"),
    "l1_loss": ("mean(|p - t|)", "fp32 partial sums in a fixed order"),
    "huber_loss": ("0.5 d^2 if |d| < delta else delta (|d| - delta / 2), d = p - t, averaged", "fp32 partial sums"),
    "kl_div": ("sum t (log t - p) / n, p being log-probabilities", "fp32 partial sums"),
    "cross_entropy": ("mean over rows of logsumexp(x) - x[target]", "logsumexp with the row max subtracted"),
}
STYLES = ("prose", "sections", "bullets")
SHORT_DTYPE = {"float32": "fp32", "float16": "fp16", "bfloat16": "bf16"}
BYTES = {"float32": 4, "float16": 2, "bfloat16": 2}


def math_lines(ops: Sequence[str]) -> list[str]:
    """'formula (safe form)' for each distinct operator of a signature, in order of first use."""
    lines = []
    for op in dict.fromkeys(ops):
        if op in POINTWISE:
            formula, safe = POINTWISE[op].math, POINTWISE[op].safe
        else:
            formula, safe = CORE_MATH.get(op, (op, "as written"))
        lines.append(f"{formula} ({safe})")
    return lines


def input_bytes(program: Program) -> int:
    """Bytes of every forward input, parameter and nn.Linear weight: what the kernels must read at least once."""
    total = 0
    for tensor in program.inputs:
        total += math.prod(program.size(tensor.dims)) * BYTES.get(tensor.dtype, 8)
    for param in program.params:
        total += math.prod(program.size(param.dims)) * BYTES[program.dtype]
    sizes = {a.name: _arg_size(program, a) for a in program.init_args}
    for stage in program.stages:
        if isinstance(stage, Linear):
            total += (sizes.get(stage.in_arg) or 0) * (sizes.get(stage.out_arg) or 0) * BYTES[program.dtype]
    return total


def _arg_size(program: Program, arg: InitArg) -> int | None:
    return program.dim(arg.dim).size if arg.dim else None


def _kb(n: int) -> str:
    return f"{n / 1024:.1f} KB" if n < 1 << 20 else f"{n / (1 << 20):.2f} MB"


def traffic_sentence(program: Program, kernels: int, config: Scale, split: bool) -> str:
    read = input_bytes(program)
    text = (f"Memory traffic: the inputs and weights ({_kb(read)}) are read once and the output written once; "
            f"with {kernels} kernel{'s' if kernels > 1 else ''}")
    if kernels > 1:
        text += f", each of the {kernels - 1} intermediate{'s' if kernels > 2 else ''} costs one more write and read"
    else:
        text += " nothing else touches global memory"
    if split:
        text += " (the price of keeping the elementwise steps in their own kernel)"
    elif kernels >= 1 and config.fuse:
        text += ", which is why the elementwise steps are fused where a kernel can take them"
    return text + "."


def write_plan(program: Program, kernel_plans: list[str], kernels: int, config: Scale, split: bool,
               rng: random.Random | None) -> str:
    """The plan paragraph(s) for a solution (see the module docstring)."""
    dtype = SHORT_DTYPE[program.dtype]
    shapes = ", ".join(f"{t.name} ({', '.join(map(str, program.size(t.dims)))})" for t in program.inputs
                       if t.dtype in SHORT_DTYPE)
    head = f"Inputs: {shapes}, {dtype}; the model {program.description}."
    maths = math_lines(program.ops)
    precision = ("Loads are converted to fp32 and stores cast back to " + dtype + ", so the intermediate math keeps "
                 "fp32 accuracy." if program.dtype != "float32" else "All arithmetic is fp32.")
    general = "No size is baked into a kernel: shapes, strides and grids come from the inputs in forward."
    traffic = traffic_sentence(program, kernels, config, split)
    style = rng.choice(STYLES) if rng is not None else "prose"
    if style == "sections":
        return "\n".join([head, "Math:", *[f"- {m}" for m in maths],
                          f"Kernels ({kernels}):", *[f"- {p}" for p in kernel_plans],
                          traffic, precision + " " + general])
    if style == "bullets":
        return "\n".join([f"- {head}", *[f"- Math: {m}." for m in maths], *[f"- {p}" for p in kernel_plans],
                          f"- {traffic}", f"- {precision}", f"- {general}"])
    math_text = "The math: " + "; ".join(maths) + "."
    return " ".join([head, math_text, f"I write it as {kernels} kernel{'s' if kernels > 1 else ''}."] + kernel_plans
                    + [traffic, precision, general])
