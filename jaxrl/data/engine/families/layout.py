"""Data movement: transpose / permute made contiguous, concatenation, index_select and gather."""

from __future__ import annotations

import dataclasses
import random

from jaxrl.data.engine.families.base import Draw, Family, Recipe
from jaxrl.data.engine.families.builder import Builder
from jaxrl.data.engine.families.common import primary
from jaxrl.data.engine.families.sizes import elementwise_shape, pick_dtype, roughen
from jaxrl.data.engine.ir import Cat, Gather, IndexSelect, Normal, Permute, RandInt

INDEX_NAMES = ("indices", "index", "idx", "positions")


def _input(b: Builder, scale: str, rank: int, budget: float = 1.0) -> list[str]:
    dims = b.dims_for(elementwise_shape(b.rng, scale, rank, budget))
    b.shape = list(dims)
    primary(b, dims, Normal())
    return dims


@dataclasses.dataclass
class PermuteFamily(Family):
    """`x.transpose(a, b).contiguous()` (transpose) or `x.permute(...).contiguous()` (permute)."""

    name: str
    category: str = "layout"
    difficulties: tuple[str, ...] = ("medium",)

    @property
    def ops(self) -> tuple[str, ...]:
        return (self.name, "contiguous")

    def draw(self, rng: random.Random, scale: str, recipe: Recipe | None = None) -> Draw:
        b = Builder(rng, pick_dtype(rng, scale))
        rank = rng.choice([2, 2, 3, 4]) if self.name == "transpose" else rng.choice([3, 4])
        _input(b, scale, rank)
        if self.name == "transpose":
            a, c = sorted(rng.sample(range(rank), 2))
            dims = list(range(rank))
            dims[a], dims[c] = c, a
            b.stage(Permute(tuple(dims), transpose=(a, c)))
            what = f"swaps dimensions {a} and {c} and makes the result contiguous"
        else:
            dims = list(range(rank))
            while dims == sorted(dims):
                rng.shuffle(dims)
            b.stage(Permute(tuple(dims)))
            what = f"permutes its dimensions to {tuple(dims)} and makes the result contiguous"
        return Draw(b.build(what), "medium", {"dims": dims})


@dataclasses.dataclass
class CatFamily(Family):
    name: str = "cat"
    category: str = "layout"
    difficulties: tuple[str, ...] = ("easy", "medium")

    @property
    def ops(self) -> tuple[str, ...]:
        return ("cat",)

    def draw(self, rng: random.Random, scale: str, recipe: Recipe | None = None) -> Draw:
        b = Builder(rng, pick_dtype(rng, scale))
        rank, count = rng.choice([2, 2, 3, 4]), rng.choice([2, 2, 3])
        shape = elementwise_shape(rng, scale, rank, budget=1 / count)
        axis = rng.randrange(rank)
        keys = b.dims_for(shape)
        names = rng.choice([("x", "y", "z"), ("a", "b", "c"), ("first", "second", "third")])
        parts = []
        for index in range(count):
            dims = list(keys)
            if index:  # the concatenated axis has its own size per input
                dims[axis] = b.dim("parts", roughen(rng, max(1, shape[axis] * rng.choice([1, 2]) // 2)))
            parts.append(b.input((names[index],), dims, Normal(mean=float(index))))
        b.shape = list(keys)
        b.stage(Cat(tuple(parts[1:]), axis))
        return Draw(b.build(f"concatenates {count} tensors along dimension {axis}"), "easy" if axis == 0 else "medium",
                    {"axis": axis, "count": count})


@dataclasses.dataclass
class IndexFamily(Family):
    """index_select (a vector of positions along one axis) or gather (an index per output element)."""

    name: str
    category: str = "layout"
    difficulties: tuple[str, ...] = ("medium",)

    @property
    def ops(self) -> tuple[str, ...]:
        return (self.name,)

    def draw(self, rng: random.Random, scale: str, recipe: Recipe | None = None) -> Draw:
        b = Builder(rng, pick_dtype(rng, scale))
        rank = rng.choice([2, 2, 3])
        dims = _input(b, scale, rank, budget=0.5)
        axis = rng.randrange(rank)
        size = b.size(dims[axis])
        picks = b.dim("index", roughen(rng, max(1, int(size * rng.uniform(0.3, 1.5)))))
        if self.name == "index_select":
            index = b.input(INDEX_NAMES, [picks], RandInt(dims[axis]), dtype="int64")
            b.stage(IndexSelect(index, axis))
            what = f"selects entries along dimension {axis} by an index vector"
        else:
            index_dims = list(dims)
            index_dims[axis] = picks
            index = b.input(INDEX_NAMES, index_dims, RandInt(dims[axis]), dtype="int64")
            b.stage(Gather(index, axis))
            what = f"gathers values along dimension {axis} with an index tensor"
        return Draw(b.build(what), "medium", {"axis": axis})


def layout_families() -> list[Family]:
    return [PermuteFamily("transpose"), PermuteFamily("permute"), CatFamily(), IndexFamily("index_select"),
            IndexFamily("gather")]
