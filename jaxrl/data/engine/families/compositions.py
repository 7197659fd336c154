"""Compositions of 2 to 4 operators in the style of KernelBench level 2, built from composable pieces.

A recipe is a head (a matmul, a norm, a softmax, a reduction, a scan, or nothing) with elementwise
pieces before or after it: activations, scalar arithmetic, per-feature vectors, a residual tensor. Each
composition family enumerates its recipes, so that many distinct problems exist and splits can hold out
whole recipes. The teacher fuses each recipe into one kernel (or two, for a matmul followed by a row
operation).
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import random

from jaxrl.data.engine.families.base import Draw, Family, Recipe
from jaxrl.data.engine.families.builder import Builder
from jaxrl.data.engine.families.common import DESCRIPTIONS, SCALAR_NAMES, input_std, op_params, primary, scalar_value
from jaxrl.data.engine.families.elementwise import ACTIVATIONS
from jaxrl.data.engine.families.matmul import add_linear, add_linear_input
from jaxrl.data.engine.families.normalization import add_norm
from jaxrl.data.engine.families.reductions import axis_value, reduced_axis
from jaxrl.data.engine.families.sizes import elementwise_shape, matmul_sizes, pick_dtype
from jaxrl.data.engine.ir import Arith, MatMul, Normal, Operand, Pointwise, Reduce, Scan, Softmax, Uniform

SCALAR_PIECES = {"mul_scalar": "mul", "add_scalar": "add", "sub_scalar": "sub", "div_scalar": "div"}
VECTOR_PIECES = {"add_bias": "add", "mul_weight": "mul"}
TENSOR_PIECES = {"add_residual": "add"}
PIECE_OPS: dict[str, tuple[str, ...]] = (
    {op: (op,) for op in ACTIVATIONS}
    | {name: (op,) for name, op in (SCALAR_PIECES | VECTOR_PIECES | TENSOR_PIECES).items()}
)
HEAD_OPS: dict[str, tuple[str, ...]] = {
    "linear": ("matmul", "add"), "linear_nobias": ("matmul",), "matmul": ("matmul",), "bmm": ("matmul",),
    "layer_norm": ("layer_norm",), "rms_norm": ("rms_norm",), "softmax": ("softmax",), "log_softmax": ("log_softmax",),
    **{name: (name,) for name in ("sum", "mean", "max", "min", "norm", "logsumexp", "cumsum", "cumprod", "cummax")},
}
PIECE_WORDS = {
    "mul_scalar": "multiplies by a scalar", "add_scalar": "adds a scalar", "sub_scalar": "subtracts a scalar",
    "div_scalar": "divides by a scalar", "add_bias": "adds a bias vector", "mul_weight": "scales by a vector",
    "add_residual": "adds a residual tensor",
}


def add_piece(b: Builder, piece: str) -> None:
    """Append one elementwise piece to the running value."""
    rng = b.rng
    if piece in ACTIVATIONS:
        b.stage(Pointwise(piece, op_params(b, piece)))
    elif piece in SCALAR_PIECES:
        op = SCALAR_PIECES[piece]
        b.stage(Arith(op, b.scalar(SCALAR_NAMES[op], scalar_value(rng, op))))
    elif piece in VECTOR_PIECES:
        op = VECTOR_PIECES[piece]
        names = ("bias", "shift", "offset") if op == "add" else ("weight", "gamma", "channel_scale")
        b.stage(Arith(op, b.param(names, (b.shape[-1],), std=0.5, mean=1.0 if op == "mul" else 0.0)))
    else:
        name = b.input(("residual", "skip", "other", "y"), list(b.shape), Normal())
        b.stage(Arith("add", Operand(name, "input")))


def _words(pieces: tuple[str, ...]) -> str:
    return ", ".join(PIECE_WORDS.get(p, f"applies {DESCRIPTIONS.get(p, p)}") for p in pieces)


def _sequences(pool: tuple[str, ...], lengths: tuple[int, ...]) -> list[tuple[str, ...]]:
    """Sequences of pieces without the same piece twice in a row."""
    out = []
    for length in lengths:
        for seq in itertools.product(pool, repeat=length):
            if all(a != b for a, b in zip(seq, seq[1:])):
                out.append(seq)
    return out


def product(heads: tuple[str | None, ...], before: list[tuple[str, ...]], after: list[tuple[str, ...]],
            allowed=lambda recipe: True) -> tuple[Recipe, ...]:
    """Recipes pre + head + post of at least two operators, in a fixed order."""
    recipes = []
    for head in heads:
        for pre in before:
            for post in after:
                recipe = pre + ((head,) if head else ()) + post
                if len(recipe_ops(recipe)) >= 2 and allowed(recipe):
                    recipes.append(recipe)
    return tuple(recipes)


def recipe_ops(recipe: Recipe) -> tuple[str, ...]:
    return tuple(op for part in recipe for op in HEAD_OPS.get(part, PIECE_OPS.get(part, ())))


@dataclasses.dataclass
class CompositionFamily(Family):
    """A fixed list of recipes; the family's builder turns one into a Program."""

    name: str
    recipe_list: tuple[Recipe, ...]
    difficulties: tuple[str, ...]
    category: str = "composition"
    composition: bool = True

    def recipes(self) -> tuple[Recipe, ...]:
        return self.recipe_list

    def recipe_ops(self, recipe: Recipe) -> tuple[str, ...]:
        return recipe_ops(recipe)

    @functools.cached_property
    def _ops(self) -> tuple[str, ...]:
        return tuple(sorted({op for recipe in self.recipe_list for op in recipe_ops(recipe)}))

    @property
    def ops(self) -> tuple[str, ...]:
        return self._ops

    @functools.cached_property
    def _known(self) -> frozenset[Recipe]:
        return frozenset(self.recipe_list)

    def draw(self, rng: random.Random, scale: str, recipe: Recipe | None = None) -> Draw:
        recipe = recipe or rng.choice(self.recipe_list)
        if recipe not in self._known:
            raise ValueError(f"{recipe} is not a recipe of {self.name}")
        head_index = next((i for i, part in enumerate(recipe) if part in HEAD_OPS), None)
        if head_index is None:
            pre, head, post = recipe, None, ()
        else:
            pre, head, post = recipe[:head_index], recipe[head_index], recipe[head_index + 1:]
        program, difficulty = BUILDERS[self.name](rng, scale, pre, head, post)
        return Draw(program, difficulty, {"recipe": list(recipe)})


# ----------------------------------------------------------------------------- how each family builds
def _gemm(rng: random.Random, scale: str, pre, head, post):
    b = Builder(rng, pick_dtype(rng, scale))
    if head in ("linear", "linear_nobias"):
        add_linear(b, add_linear_input(b, scale), bias=head == "linear")
        what = "applies nn.Linear" + ("" if head == "linear" else " (no bias)")
    else:
        batched = head == "bmm"
        batch, m, n, k = matmul_sizes(rng, scale, b.dtype, batched)
        lead = [b.dim("batch", batch)] if batched else []
        m_key, n_key, k_key = b.dim("m", m), b.dim("n", n), b.dim("k", k)
        b.shape = lead + [m_key, k_key]
        primary(b, lead + [m_key, k_key], Normal())
        other = b.input(("weight_matrix", "B", "w", "other"), lead + [k_key, n_key], Normal())
        b.stage(MatMul(other))
        b.shape = lead + [m_key, n_key]
        what = "multiplies two " + ("batches of matrices" if batched else "matrices")
    for piece in post:
        add_piece(b, piece)
    return b.build(f"{what}, then {_words(post)}"), "hard"


def _chain(rng: random.Random, scale: str, pre, head, post):
    b = Builder(rng, pick_dtype(rng, scale))
    dims = b.dims_for(elementwise_shape(rng, scale, rng.choice([2, 2, 3, 4]), budget=0.5))
    b.shape = list(dims)
    primary(b, dims, Normal(std=input_std(rng, pre[0])))
    for piece in pre:
        add_piece(b, piece)
    return b.build(_words(pre)), "easy" if len(pre) == 2 else "medium"


def _norm(rng: random.Random, scale: str, pre, head, post):
    b = Builder(rng, pick_dtype(rng, scale))
    add_norm(b, scale, head, rng.choice([2, 2, 3]), head=True, axes=1)  # vectors index the last axis
    for piece in post:
        add_piece(b, piece)
    return b.build(f"applies {head.replace('_', ' ')}, then {_words(post)}"), "medium"


def _rows(rng: random.Random, scale: str, pre, head, post):
    """softmax / reductions / scans with pieces before and after, over the last axis or another one."""
    scan = head in ("cumsum", "cumprod", "cummax")
    # The reference rounds each piece's result to 16 bits before a long sum or scan adds them up; the fused kernel
    # does not, and over thousands of terms the two drift apart by more than the tolerance near zero.
    accumulates = scan or (pre and head not in ("softmax", "log_softmax"))
    b = Builder(rng, "float32" if accumulates else pick_dtype(rng, scale))
    rank = rng.choice([2, 3])
    dims, axis, last = reduced_axis(b, scale, rank, 0.6, full_row=(256, 2048 if scan else 16384))
    shifted = head in ("mean", "max", "min", "logsumexp")
    std = 3.0 if head in ("softmax", "log_softmax") else round(rng.uniform(0.5, 2.0), 2)
    dist = Uniform(0.97, 1.03) if head == "cumprod" else Normal(std=std, shift_axis=axis if shifted else None)
    primary(b, dims, dist)
    for piece in pre:
        add_piece(b, piece)
    dim = axis_value(b, axis, rank)
    if head in ("softmax", "log_softmax"):
        b.stage(Softmax(dim, head == "log_softmax"))
    elif scan:
        b.stage(Scan(head, dim))
    else:
        b.stage(Reduce(head, dim, keepdim=rng.random() < 0.3))
    for piece in post:
        add_piece(b, piece)
    parts = [_words(pre)] * bool(pre) + [f"applies {head} over dimension {axis}"] + [_words(post)] * bool(post)
    return b.build(", then ".join(parts)), "medium" if last else "hard"


def _gemm_rowop(rng: random.Random, scale: str, pre, head, post):
    b = Builder(rng, pick_dtype(rng, scale))
    add_linear(b, add_linear_input(b, scale, rank=2), bias=True)
    tail = post[:-1]
    for piece in tail:
        add_piece(b, piece)
    row_op = post[-1]
    if row_op == "layer_norm":
        add_norm(b, scale, "layer_norm", 2, head=False, axes=1)
    elif row_op in ("softmax", "log_softmax"):
        b.stage(Softmax(axis_value(b, 1, 2), row_op == "log_softmax"))
    else:
        b.stage(Reduce(row_op, axis_value(b, 1, 2), keepdim=rng.random() < 0.5))
    steps = ", then ".join(["applies nn.Linear"] + ([_words(tail)] if tail else []) + [f"{row_op} over the features"])
    return b.build(steps), "hard"


BUILDERS = {"gemm_epilogue": _gemm, "matmul_epilogue": _gemm, "elementwise_chain": _chain,
            "norm_activation": _norm, "softmax_chain": _rows, "reduce_chain": _rows, "scan_chain": _rows,
            "gemm_rowop": _gemm_rowop}


def _singles(pieces) -> list[tuple[str, ...]]:
    return [(p,) for p in pieces]


# Activations that keep information after a reduction whose results are large and positive (max, norm,
# logsumexp): the saturating ones (sigmoid, tanh, clamp, hardsigmoid...) would map every row to ~the same value.
UNBOUNDED_ABOVE = ("relu", "leaky_relu", "gelu", "gelu_tanh", "silu", "softplus", "elu", "selu", "mish")


def _reduce_allowed(recipe: Recipe) -> bool:
    head = next(part for part in recipe if part in HEAD_OPS)
    before, after = recipe[:recipe.index(head)], recipe[recipe.index(head) + 1:]
    if head in ("max", "min") and any(p in ACTIVATIONS for p in before):
        return False  # an activation before the max or min of a long row saturates (relu -> 0, tanh -> -1)
    post_acts = [p for p in after if p in ACTIVATIONS]
    if before and post_acts:
        return False  # a piece before a reduction moves its results far from 0, where activations saturate
    if head in ("max", "norm", "logsumexp"):
        return all(p in UNBOUNDED_ABOVE for p in post_acts)
    if head == "min":
        return all(p == "leaky_relu" for p in post_acts)
    return True


def _softmax_allowed(recipe: Recipe) -> bool:
    # log-probabilities are large and negative: only scalars and leaky_relu keep them apart
    if "log_softmax" in recipe:
        return all(p not in ACTIVATIONS or p == "leaky_relu" for p in recipe)
    return True


def _scan_allowed(recipe: Recipe) -> bool:
    # a cumulative product of anything but values near 1 under- or overflows
    return recipe[0] == "cumprod" or "cumprod" not in recipe


def composition_families() -> list[Family]:
    acts, scalars = tuple(ACTIVATIONS), tuple(SCALAR_PIECES)
    vectors, none = tuple(VECTOR_PIECES), [()]
    epilogue = _sequences(acts + scalars + vectors + tuple(TENSOR_PIECES), (1, 2))
    chains = [s for s in _sequences(acts + scalars + vectors + tuple(TENSOR_PIECES), (2, 3)) if set(s) & set(acts)]
    # After a Linear, softmax over thousands of features is ~1/N everywhere and a mean or logsumexp is ~the same
    # for every row (degenerate outputs); these row operations keep the rows apart.
    plain_rows, act_rows = ("log_softmax", "layer_norm", "sum", "max"), ("log_softmax", "layer_norm")
    return [
        CompositionFamily("gemm_epilogue", product(("linear", "linear_nobias"), none, epilogue), ("hard",)),
        CompositionFamily("matmul_epilogue", product(("matmul", "bmm"), none, _sequences(acts + scalars, (1, 2))),
                          ("hard",)),
        CompositionFamily("elementwise_chain", product((None,), chains, none), ("easy", "medium")),
        CompositionFamily("norm_activation", product(("layer_norm", "rms_norm"), none,
                                                     _sequences(acts + scalars + vectors, (1, 2))), ("medium",)),
        CompositionFamily("softmax_chain", product(("softmax", "log_softmax"),
                                                   none + _singles(("mul_scalar", "div_scalar")),
                                                   none + _singles(scalars + acts), _softmax_allowed),
                          ("medium", "hard")),
        CompositionFamily("reduce_chain", product(("sum", "mean", "max", "min", "norm", "logsumexp"),
                                                  none + _singles(acts + ("mul_scalar", "add_scalar")),
                                                  none + _singles(scalars + acts), _reduce_allowed),
                          ("medium", "hard")),
        CompositionFamily("scan_chain", product(("cumsum", "cumprod", "cummax"),
                                                none + _singles(("relu", "sigmoid", "mul_scalar")),
                                                none + _singles(("mul_scalar", "add_scalar", "tanh")), _scan_allowed),
                          ("medium", "hard")),
        CompositionFamily("gemm_rowop", product(("linear",), none, [(row,) for row in plain_rows]
                                                + [(act, row) for act in acts for row in act_rows]), ("hard",)),
    ]
