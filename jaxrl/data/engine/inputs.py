"""`get_inputs()` as source text, and the input sets (TritonRL's input augmentation).

An input set is another `get_inputs()` (and, when the task has float `__init__` arguments, another
`get_init_inputs()` with other values), run in the reference module's namespace. It keeps every size a
weight or an `__init__` argument depends on (a Linear's in_features, a norm's width), keeps ranks and
dtypes, and changes the other sizes to odd ones (not multiples of any block size) and the value
ranges, so that a kernel that hard-codes the problem's shapes or constants fails.
"""

from __future__ import annotations

import dataclasses
import math
import random

from sandbox_service.options import InputSet

from jaxrl.data.engine.ir import (
    Normal,
    Probabilities,
    Program,
    RandInt,
    Signs,
    TensorInput,
    Uniform,
)

# Per-trial input memory stays under about 1 GB at full scale.
MAX_INPUT_BYTES = 1 << 30
ITEMSIZE = {"float32": 4, "float16": 2, "bfloat16": 2, "int64": 8}
JITTER_NAME = "scale"
ATTEMPTS = 25


def torch_dtype(dtype: str) -> str:
    return f"torch.{dtype}"


def _dtype_kw(dtype: str) -> str:
    return "" if dtype == "float32" else f", dtype={torch_dtype(dtype)}"


def _shape(tensor: TensorInput, spell: dict[str, str], axis_to_one: int | None = None) -> str:
    parts = []
    for axis, d in enumerate(tensor.dims):
        parts.append("1" if axis == axis_to_one or isinstance(d, int) else spell[d])
    return ", ".join(parts)


def _num(value: float) -> str:
    return repr(float(value))


def tensor_expr(tensor: TensorInput, spell: dict[str, str]) -> str:
    """The torch expression drawing one input; `spell` maps dim keys to a constant name or a literal."""
    dist, shape, kw = tensor.dist, _shape(tensor, spell), _dtype_kw(tensor.dtype)
    jitter = f" * {JITTER_NAME}" if getattr(dist, "jitter", False) else ""
    if isinstance(dist, Normal):
        expr = f"torch.randn({shape}{kw})"
        if dist.std != 1.0:
            expr += f" * {_num(dist.std)}"
        expr += jitter
        if dist.shift_axis is not None:
            expr += f" + torch.randn({_shape(tensor, spell, dist.shift_axis)}{kw})"
        if dist.mean:
            expr += f" + {_num(dist.mean)}" if dist.mean > 0 else f" - {_num(-dist.mean)}"
        return expr
    if isinstance(dist, Uniform):
        expr = f"torch.rand({shape}{kw})"
        width = dist.high - dist.low
        if width != 1.0:
            expr += f" * {_num(width)}"
        expr += jitter
        if dist.low:
            expr += f" + {_num(dist.low)}" if dist.low > 0 else f" - {_num(-dist.low)}"
        return expr
    size = f"({shape},)" if tensor.rank == 1 else f"({shape})"
    if isinstance(dist, RandInt):
        high = dist.high if isinstance(dist.high, int) else spell[dist.high]
        return f"torch.randint(0, {high}, {size})"
    if isinstance(dist, Signs):
        signs = f"torch.randint(0, 2, {size}) * 2 - 1"
        return f"({signs}).float()" if tensor.dtype == "float32" else f"({signs}).to({torch_dtype(tensor.dtype)})"
    if isinstance(dist, Probabilities):
        logits = f"torch.randn({shape}{kw})"
        if dist.temperature != 1.0:
            logits += f" * {_num(dist.temperature)}"
        return f"({logits}{jitter}).softmax(dim=-1)"
    raise TypeError(f"unknown distribution {dist!r}")


def get_inputs_source(program: Program, spell: dict[str, str], inline: bool, indent: str = "    ") -> str:
    """The body-and-header of `get_inputs()`. `inline`: one return of a list of expressions."""
    lines = ["def get_inputs():"]
    if any(getattr(t.dist, "jitter", False) for t in program.inputs):
        lines.append(f"{indent}{JITTER_NAME} = 0.5 + torch.rand(1).item()")
    exprs = [tensor_expr(t, spell) for t in program.inputs]
    if inline and len(program.inputs) <= 2 and sum(map(len, exprs)) < 90:
        lines.append(f"{indent}return [{', '.join(exprs)}]")
    else:
        for tensor, expr in zip(program.inputs, exprs):
            lines.append(f"{indent}{tensor.name} = {expr}")
        lines.append(f"{indent}return [{', '.join(t.name for t in program.inputs)}]")
    return "\n".join(lines) + "\n"


# ----------------------------------------------------------------------------- input sets
def _odd_size(rng: random.Random, size: int, scale: str, grow: bool = False) -> int:
    """Another size near `size` (larger with `grow`): never a multiple of 16 (so every power-of-two block
    has a partial tail)."""
    low = 1.15 if grow else 0.3 if scale == "full" else 0.4
    new = max(2, round(size * rng.uniform(low, 1.6)))
    while new % 16 == 0 or new == size:
        new += 1
    return new


def _bytes(program: Program, sizes: dict[str, int]) -> int:
    return sum(math.prod(program.size(t.dims, sizes)) * ITEMSIZE.get(t.dtype, 4) for t in program.inputs)


def _largest_numel(program: Program, sizes: dict[str, int]) -> int:
    return max(math.prod(program.size(t.dims, sizes)) for t in program.inputs)


def draw_sizes(program: Program, rng: random.Random, scale: str, max_numel: int, grow: bool = False
               ) -> dict[str, int]:
    """New sizes for the free dims, within the scale's limits (the fixed dims keep theirs); with `grow`,
    each free dim larger than the default's where the limits leave room."""
    free = [d for d in program.dims if d.key not in program.fixed_dims]
    if not free:
        raise ValueError("a program without free dims cannot vary its input shapes")
    sizes = {d.key: d.size for d in program.dims}
    for d in free:
        sizes[d.key] = _odd_size(rng, d.size, scale, grow)
    # Shrink free dims (a random one of those above 2) until the inputs fit the scale's limits again.
    while _largest_numel(program, sizes) > max_numel or _bytes(program, sizes) > MAX_INPUT_BYTES:
        shrinkable = [d.key for d in free if sizes[d.key] > 2]
        if not shrinkable:
            raise ValueError("the fixed dims alone exceed the size limits")
        key = rng.choice(shrinkable)
        sizes[key] = max(2, min(sizes[key] - 1, sizes[key] * 3 // 4))
    return sizes


def other_values(tensor: TensorInput, rng: random.Random) -> TensorInput:
    """The same input drawn from a wider or shifted range where that keeps the problem valid."""
    dist = tensor.dist
    if not tensor.widen:
        return tensor
    if isinstance(dist, Normal):
        dist = dataclasses.replace(dist, std=round(dist.std * rng.uniform(2.0, 4.0), 3))
    elif isinstance(dist, Uniform) and dist.low < 0:
        factor = round(rng.uniform(2.0, 3.0), 3)
        dist = dataclasses.replace(dist, low=dist.low * factor, high=dist.high * factor)
    return dataclasses.replace(tensor, dist=dist)


def other_init_values(program: Program, rng: random.Random) -> dict[str, float]:
    """New values for the float `__init__` arguments (sizes and integer arguments keep theirs)."""
    values = {}
    for arg in program.init_args:
        if arg.is_scalar and isinstance(arg.value, float):
            values[arg.name] = round(arg.value * rng.uniform(0.5, 1.5), 4)
    return values


def init_inputs_source(program: Program, spell: dict[str, str], values: dict[str, float] | None = None) -> str:
    """`get_init_inputs()`: sizes through their constants, numbers through theirs unless `values` overrides."""
    items = []
    for arg in program.init_args:
        if values and arg.name in values:
            items.append(repr(values[arg.name]))
        else:
            items.append(spell.get(f"init:{arg.name}", arg.name))
    return f"def get_init_inputs():\n    return [{', '.join(items)}]\n"


def make_input_sets(
    program: Program, spell: dict[str, str], rng: random.Random, scale: str, max_numel: int, count: int = 3
) -> tuple[InputSet, ...]:
    """`count` input sets: other shapes; other shapes and values; other values and init arguments.

    The first set's free dims grow where the limits leave room: a kernel that hard-codes the default's
    sizes then leaves part of the output unwritten and fails. (On smaller shapes it would compute every
    output element, reading and writing past the tensors, and could pass.)"""
    sets = []
    seen = {tuple(d.size for d in program.dims)}
    for index in range(count):
        for _ in range(ATTEMPTS):  # shapes unlike the default's and the other sets' when there is room
            sizes = draw_sizes(program, rng, scale, max_numel, grow=index == 0)
            if tuple(sizes[d.key] for d in program.dims) not in seen:
                break
        seen.add(tuple(sizes[d.key] for d in program.dims))
        local = dict(spell)
        for d in program.dims:
            if d.key not in program.fixed_dims:
                local[d.key] = str(sizes[d.key])
        varied = program
        if index >= 1:
            varied = dataclasses.replace(program, inputs=tuple(other_values(t, rng) for t in program.inputs))
        source = get_inputs_source(varied, local, inline=False)
        new_init = other_init_values(program, rng) if index == 2 else {}
        if new_init:
            source += "\n\n" + init_inputs_source(program, spell, new_init)
        name = ("shapes", "shapes_values", "values_init" if new_init else "values")[min(index, 2)]
        sets.append(InputSet(name if index < 3 else f"{name}{index}", source))
    return tuple(sets)
