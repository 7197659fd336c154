"""Incremental construction of a Program with unique names, shared by all families.

It tracks the shape of the running value (as dim keys) so that pieces can ask for "a vector along the
last axis" without knowing what came before them, and it draws names for constants, inputs,
`__init__` arguments and parameters from small pools, so that tasks do not all read `x`, `dim`.
"""

from __future__ import annotations

import random

from jaxrl.data.engine.ir import (
    Dim,
    Distribution,
    InitArg,
    Operand,
    Param,
    Program,
    Scalar,
    Stage,
    TensorInput,
)

ROLE_NAMES: dict[str, tuple[str, ...]] = {
    "batch": ("batch_size", "batch", "B", "num_samples", "n_batch"),
    "features": ("dim", "features", "hidden_size", "D", "num_features", "hidden"),
    "seq": ("seq_len", "length", "L", "num_tokens", "T"),
    "channels": ("channels", "C", "num_channels", "n_channels"),
    "height": ("height", "H", "h"),
    "width": ("width", "W", "w"),
    "rows": ("rows", "n_rows", "num_rows"),
    "cols": ("cols", "n_cols", "num_cols", "row_size"),
    "classes": ("num_classes", "n_classes", "classes"),
    "m": ("M", "m", "rows_a", "dim_m"),
    "n": ("N", "n", "cols_b", "dim_n"),
    "k": ("K", "k", "inner_dim", "dim_k"),
    "in": ("in_features", "input_size", "in_dim"),
    "out": ("out_features", "output_size", "out_dim"),
    "index": ("num_indices", "n_index", "k", "num_picks"),
    "parts": ("dim1", "size_a", "part_a"),
}
# Names of the modules, and the jitter variable of get_inputs (a local that would shadow a constant).
MODULE_NAMES = frozenset({"torch", "nn", "F", "self", "Model", "ModelNew", "get_inputs", "get_init_inputs", "scale",
                          "math", "triton", "tl"})
# The locals of the teacher's forward: forward inputs must not take these names.
FORWARD_LOCALS = frozenset({
    "out", "h", "h2", "h3", "x2", "y2", "n_elements", "n_cols", "n_rows", "BLOCK_SIZE", "num_warps", "M", "N", "K",
    "a_t", "b_t", "d", "R", "inner", "outer", "partials", "n_partials", "view", "part", "part_cols", "out_cols",
    "col_offset", "size_dim", "n_index", "total",
})
RANK_ROLES = {1: ("features",), 2: ("batch", "features"), 3: ("batch", "seq", "features"),
              4: ("batch", "channels", "height", "width")}


class Builder:
    def __init__(self, rng: random.Random, dtype: str):
        self.rng = rng
        self.dtype = dtype
        self.dims: list[Dim] = []
        self.inputs: list[TensorInput] = []
        self.init_args: list[InitArg] = []
        self.params: list[Param] = []
        self.stages: list[Stage] = []
        self.names: set[str] = set(MODULE_NAMES)
        self.shape: list[str | int] = []  # dim keys of the running value

    # -- names -----------------------------------------------------------------------------------
    def name(self, candidates: tuple[str, ...] | list[str], keep_order: bool = False,
             avoid: frozenset[str] = frozenset()) -> str:
        pool = list(candidates) if keep_order else self.rng.sample(list(candidates), len(candidates))
        for name in pool:
            if name not in self.names and name not in avoid:
                self.names.add(name)
                return name
        base, n = candidates[0], 2
        while f"{base}{n}" in self.names or f"{base}{n}" in avoid:
            n += 1
        self.names.add(f"{base}{n}")
        return f"{base}{n}"

    # -- sizes -----------------------------------------------------------------------------------
    def dim(self, role: str, size: int, named: bool = True) -> str:
        key = f"d{len(self.dims)}"
        name = self.name(ROLE_NAMES[role]) if named else None
        self.dims.append(Dim(key, int(size), name))
        return key

    def dims_for(self, sizes: list[int], roles: tuple[str, ...] | None = None) -> list[str]:
        roles = roles or RANK_ROLES.get(len(sizes)) or tuple(["features"] * len(sizes))
        inline = self.rng.random() < 0.15  # sometimes sizes are written inline, without constants
        return [self.dim(role, size, named=not inline) for role, size in zip(roles, sizes)]

    def size(self, key: str) -> int:
        return next(d.size for d in self.dims if d.key == key)

    # -- inputs, arguments, parameters -----------------------------------------------------------
    def input(self, names: tuple[str, ...], dims: list[str | int], dist: Distribution, dtype: str | None = None,
              keep_order: bool = False, widen: bool = True) -> str:
        name = self.name(names, keep_order, avoid=FORWARD_LOCALS)
        self.inputs.append(TensorInput(name, tuple(dims), dtype or self.dtype, dist, widen))
        return name

    def scalar(self, names: tuple[str, ...], value: float, init_probability: float = 0.5) -> Scalar:
        """A number: an `__init__` argument (KernelBench style) or a literal in forward."""
        value = round(float(value), 4)
        if self.rng.random() < init_probability:
            name = self.name(names)
            self.init_args.append(InitArg(name, value=value))
            return Scalar(value, name)
        return Scalar(value)

    def init_int(self, names: tuple[str, ...], value: int) -> Scalar:
        name = self.name(names)
        self.init_args.append(InitArg(name, value=int(value)))
        return Scalar(int(value), name)

    def init_dim(self, key: str) -> str:
        """An `__init__` argument that is a size; named like the size's constant when there is one."""
        for arg in self.init_args:
            if arg.dim == key:
                return arg.name
        dim = next(d for d in self.dims if d.key == key)
        if dim.name is None:  # an init argument needs a constant for get_init_inputs
            index = self.dims.index(dim)
            dim = Dim(dim.key, dim.size, self.name(ROLE_NAMES["features"]))
            self.dims[index] = dim
        self.init_args.append(InitArg(dim.name, dim=key))
        return dim.name

    def init_shape(self, names: tuple[str, ...], dims: tuple[str | int, ...]) -> str:
        name = self.name(names)
        self.init_args.append(InitArg(name, shape=tuple(dims)))
        return name

    def param(
        self, names: tuple[str, ...], dims: tuple[str | int, ...], std: float = 1.0, mean: float = 0.0
    ) -> Operand:
        """An nn.Parameter shaped by an `__init__` argument (a size or a shape tuple)."""
        attr = self.name(names)
        keys = [d for d in dims if isinstance(d, str)]
        if len(dims) == 1 and self.rng.random() < 0.5:
            self.init_dim(keys[0])
            self.params.append(Param(attr, tuple(dims), std, mean))
        else:
            shape_arg = self.init_shape((f"{attr}_shape", "param_shape", f"{attr}_size"), tuple(dims))
            self.params.append(Param(attr, tuple(dims), std, mean, shape_arg=shape_arg))
        return Operand(attr, "param", self.axes_of(dims))

    def param_from(self, names: tuple[str, ...], dims: tuple[str | int, ...], shape_arg: str, std: float = 1.0,
                   mean: float = 0.0) -> str:
        """An nn.Parameter shaped by an existing `__init__` argument (e.g. a norm's normalized_shape)."""
        attr = self.name(names)
        self.params.append(Param(attr, tuple(dims), std, mean, shape_arg=shape_arg))
        return attr

    def axes_of(self, dims: tuple[str | int, ...]) -> tuple[int, int] | None:
        """The axes of the running value an operand of shape `dims` spans (right-aligned broadcasting)."""
        rank = len(self.shape)
        padded = [1] * (rank - len(dims)) + list(dims)
        spanned = [i for i, d in enumerate(padded) if d != 1]
        if not spanned or spanned == list(range(rank)):
            return None if spanned else (rank - 1, rank)
        start, stop = spanned[0], spanned[-1] + 1
        if any(padded[i] == 1 for i in range(start, stop)):
            raise ValueError(f"operand dims {dims} do not span one contiguous range of axes")
        return (start, stop)

    # -- the pipeline ----------------------------------------------------------------------------
    def stage(self, stage: Stage) -> None:
        self.stages.append(stage)

    def build(self, description: str) -> Program:
        return Program(tuple(self.dims), tuple(self.inputs), tuple(self.stages), self.dtype, tuple(self.init_args),
                       tuple(self.params), description)
