"""Matrix products: A @ B, with a transposed operand, batched, and nn.Linear (with its bias)."""

from __future__ import annotations

import dataclasses
import random

from jaxrl.data.engine.families.base import Draw, Family, Recipe
from jaxrl.data.engine.families.builder import Builder
from jaxrl.data.engine.families.common import primary
from jaxrl.data.engine.families.sizes import matmul_sizes, pick_dtype
from jaxrl.data.engine.ir import Linear, MatMul, Normal

OPERAND_NAMES = (("A", "B"), ("a", "b"), ("x", "w"), ("lhs", "rhs"), ("A", "W"))


@dataclasses.dataclass
class MatmulFamily(Family):
    """torch.matmul / @ / mm / bmm of two inputs; `transposed`: one side is stored transposed (A.T @ B)."""

    name: str
    batched: bool = False
    transposed: bool = False
    category: str = "matmul"
    difficulties: tuple[str, ...] = ("hard",)

    @property
    def ops(self) -> tuple[str, ...]:
        return ("transpose", "matmul") if self.transposed else ("matmul",)

    def draw(self, rng: random.Random, scale: str, recipe: Recipe | None = None) -> Draw:
        b = Builder(rng, pick_dtype(rng, scale))
        batch, m, n, k = matmul_sizes(rng, scale, b.dtype, self.batched)
        lead = [b.dim("batch", batch)] if self.batched else []
        m_key, n_key, k_key = b.dim("m", m), b.dim("n", n), b.dim("k", k)
        left, right = rng.choice(OPERAND_NAMES)
        side = rng.choice(["self", "other"]) if self.transposed else None
        a_dims = [k_key, m_key] if side == "self" else [m_key, k_key]
        b_dims = [n_key, k_key] if side == "other" else [k_key, n_key]
        b.shape = lead + a_dims
        b.input((left,), lead + a_dims, Normal())
        other = b.input((right, right.lower() + "2"), lead + b_dims, Normal())
        b.stage(MatMul(other, transpose_self=side == "self", transpose_other=side == "other"))
        what = ("performs a batched matrix multiplication" if self.batched else "performs a matrix multiplication")
        if side:
            what += f" with the {'first' if side == 'self' else 'second'} operand transposed"
        return Draw(b.build(what), "hard", {"M": m, "N": n, "K": k, "batch": batch, "transposed": side})


@dataclasses.dataclass
class LinearFamily(Family):
    """nn.Linear(in_features, out_features) on a 2-D or 3-D input."""

    name: str = "linear"
    category: str = "matmul"
    difficulties: tuple[str, ...] = ("hard",)

    @property
    def ops(self) -> tuple[str, ...]:
        return ("matmul", "add")

    def draw(self, rng: random.Random, scale: str, recipe: Recipe | None = None) -> Draw:
        b = Builder(rng, pick_dtype(rng, scale))
        add_linear(b, add_linear_input(b, scale), bias=True)
        return Draw(b.build("applies a fully connected layer (nn.Linear)"), "hard", {})


def add_linear_input(b: Builder, scale: str, rank: int | None = None) -> int:
    """The input of a Linear: (batch, in) or (batch, seq, in), sized like a matmul of the scale.
    Returns the out_features that go with it."""
    rng = b.rng
    _, m, n, k = matmul_sizes(rng, scale, b.dtype)
    rank = rank or rng.choice([2, 2, 3])
    if rank == 3:
        seq = rng.choice([2, 4, 8]) if scale == "cpu" else rng.choice([8, 16, 32, 64])
        lead = [b.dim("batch", max(1, m // seq)), b.dim("seq", seq)]
    else:
        lead = [b.dim("batch", m)]
    in_key = b.dim("in", k)
    b.shape = lead + [in_key]
    primary(b, lead + [in_key], Normal())
    return n


def add_linear(b: Builder, out_size: int, bias: bool) -> None:
    """nn.Linear from the running value's last axis to a new one of `out_size` features."""
    in_key = b.shape[-1]
    out_key = b.dim("out", out_size)
    in_arg, out_arg = b.init_dim(in_key), b.init_dim(out_key)
    attr = b.name(("linear", "fc", "gemm", "proj", "dense"))
    b.stage(Linear(attr, in_arg, out_arg, bias))
    b.shape = b.shape[:-1] + [out_key]


def matmul_families() -> list[Family]:
    return [MatmulFamily("matmul"), MatmulFamily("matmul_transposed", transposed=True),
            MatmulFamily("bmm", batched=True), LinearFamily()]
