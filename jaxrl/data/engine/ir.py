"""The description of a generated task that both the reference writer and the teacher read.

A family draws a `Program`: named sizes, forward inputs (with how their values are drawn), `__init__`
arguments, parameters and a pipeline of stages applied to a running value that starts as the first
input. `render` writes it as a KernelBench module; `teacher` lowers the same stages to Triton kernels.
Keeping one description for both sides is what makes the solution correct by construction.
"""

from __future__ import annotations

import dataclasses
from typing import Literal, Union

FLOAT_DTYPES = ("float32", "float16", "bfloat16")


@dataclasses.dataclass(frozen=True)
class Dim:
    """A size. `name` is its module-level constant in the reference (None: written as a literal)."""

    key: str
    size: int
    name: str | None


# ----------------------------------------------------------------------------- values of inputs
@dataclasses.dataclass(frozen=True)
class Normal:
    """randn * std + mean; `shift_axis`: plus a second normal draw that is constant along that axis
    (so that means and sums over it differ between positions instead of all being ~mean)."""

    mean: float = 0.0
    std: float = 1.0
    shift_axis: int | None = None
    jitter: bool = False  # scale by a per-call random factor, so that scalar outputs differ between trials


@dataclasses.dataclass(frozen=True)
class Uniform:
    low: float = 0.0
    high: float = 1.0
    jitter: bool = False


@dataclasses.dataclass(frozen=True)
class RandInt:
    """Integers in [0, high): `high` is a dim key (class counts, indexed sizes) or a number."""

    high: str | int


@dataclasses.dataclass(frozen=True)
class Signs:
    """-1 or +1 (hinge-loss targets)."""


@dataclasses.dataclass(frozen=True)
class Probabilities:
    """softmax(randn * temperature) over the last axis: rows of positive values summing to one."""

    temperature: float = 1.0
    jitter: bool = False


Distribution = Union[Normal, Uniform, RandInt, Signs, Probabilities]


@dataclasses.dataclass(frozen=True)
class TensorInput:
    """A forward argument. `dims` holds dim keys, or 1 for a broadcast axis."""

    name: str
    dims: tuple[str | int, ...]
    dtype: str
    dist: Distribution
    widen: bool = True  # input sets may draw it from a wider range (False where that would overflow)

    @property
    def rank(self) -> int:
        return len(self.dims)


# ----------------------------------------------------------------------------- __init__ arguments
@dataclasses.dataclass(frozen=True)
class InitArg:
    """An `__init__` argument, returned by `get_init_inputs()` through a module-level constant.

    `dim`: the argument is that size (its constant is the dim's); `shape`: a tuple of dim keys;
    otherwise `value` is a number with its own constant named like the argument.
    """

    name: str
    value: float | int | None = None
    dim: str | None = None
    shape: tuple[str | int, ...] | None = None

    @property
    def is_scalar(self) -> bool:
        return self.dim is None and self.shape is None


@dataclasses.dataclass(frozen=True)
class Scalar:
    """A number used in forward: a literal, or the `__init__` argument `init` (stored as self.<init>)."""

    value: float | int
    init: str | None = None


@dataclasses.dataclass(frozen=True)
class Param:
    """An nn.Parameter created in `__init__`: randn(dims) * std + mean, in the task's dtype."""

    attr: str
    dims: tuple[str | int, ...]
    std: float = 1.0
    mean: float = 0.0
    shape_arg: str | None = None  # written as torch.randn(<this init argument>) when set


@dataclasses.dataclass(frozen=True)
class Operand:
    """A tensor the running value is combined with: a forward input or a parameter. `axes` = [start, stop)
    of the running value's axes it spans (its other axes are 1); None: it has the value's full shape."""

    name: str
    source: Literal["input", "param"]
    axes: tuple[int, int] | None = None


# ----------------------------------------------------------------------------- stages
@dataclasses.dataclass(frozen=True)
class Pointwise:
    op: str
    params: tuple[tuple[str, Scalar], ...] = ()


@dataclasses.dataclass(frozen=True)
class Arith:
    """value <op> other (or other <op> value when `reverse`)."""

    op: Literal["add", "sub", "mul", "div"]
    other: Scalar | Operand
    reverse: bool = False


@dataclasses.dataclass(frozen=True)
class Linear:
    """nn.Linear(in_arg, out_arg[, bias=False]) held in self.<attr>."""

    attr: str
    in_arg: str
    out_arg: str
    bias: bool = True


@dataclasses.dataclass(frozen=True)
class MatMul:
    """value @ other (2-D, or batched when both are 3-D); `transpose_*`: that side is used transposed."""

    other: str
    transpose_self: bool = False
    transpose_other: bool = False


@dataclasses.dataclass(frozen=True)
class Reduce:
    """sum/mean/max/min/argmax/argmin/norm/logsumexp/var/std over `dim` (None: over everything, a 0-d
    result). var and std (unbiased) have no teacher template: their pairs come from Inductor."""

    kind: Literal["sum", "mean", "max", "min", "argmax", "argmin", "norm", "logsumexp", "var", "std"]
    dim: Scalar | None
    keepdim: bool = False


@dataclasses.dataclass(frozen=True)
class Softmax:
    dim: Scalar
    log: bool = False


@dataclasses.dataclass(frozen=True)
class Norm:
    """layer_norm or rms_norm over the last len(norm_dims) axes. `module`: an nn.LayerNorm/nn.RMSNorm in
    self.<attr> (default weights); else F.layer_norm/F.rms_norm with parameters self.<attr>_weight/_bias."""

    kind: Literal["layer_norm", "rms_norm"]
    attr: str
    norm_dims: tuple[str, ...]
    shape_arg: str
    eps: float
    module: bool = True
    weight_attr: str | None = None
    bias_attr: str | None = None


@dataclasses.dataclass(frozen=True)
class Scan:
    """A scan along `dim`; logcumsumexp and cummin have no teacher template (their pairs come from Inductor)."""

    kind: Literal["cumsum", "cumprod", "cummax", "cummin", "logcumsumexp"]
    dim: Scalar


@dataclasses.dataclass(frozen=True)
class Permute:
    """A permutation made contiguous (`x.permute(...).contiguous()`); `transpose` writes it as a swap."""

    dims: tuple[int, ...]
    transpose: tuple[int, int] | None = None


@dataclasses.dataclass(frozen=True)
class Cat:
    others: tuple[str, ...]
    dim: int


@dataclasses.dataclass(frozen=True)
class IndexSelect:
    index: str
    dim: int


@dataclasses.dataclass(frozen=True)
class Gather:
    index: str
    dim: int


@dataclasses.dataclass(frozen=True)
class CosineSimilarity:
    other: str
    dim: int


@dataclasses.dataclass(frozen=True)
class Loss:
    """F.mse_loss / l1_loss / huber_loss / cross_entropy / kl_div of the value against `target`."""

    kind: Literal["mse_loss", "l1_loss", "huber_loss", "cross_entropy", "kl_div"]
    target: str
    reduction: Literal["mean", "sum", "batchmean"] = "mean"
    delta: Scalar | None = None  # huber_loss


Stage = Union[
    Pointwise, Arith, Linear, MatMul, Reduce, Softmax, Norm, Scan, Permute, Cat, IndexSelect, Gather,
    CosineSimilarity, Loss,
]


def stage_ops(stage: Stage) -> tuple[str, ...]:
    """The canonical operator names a stage contributes to the signature, in execution order."""
    if isinstance(stage, Pointwise):
        return (stage.op,)
    if isinstance(stage, Arith):
        return (stage.op,)
    if isinstance(stage, Linear):
        return ("matmul", "add") if stage.bias else ("matmul",)
    if isinstance(stage, MatMul):
        return ("transpose",) * (stage.transpose_self + stage.transpose_other) + ("matmul",)
    if isinstance(stage, Reduce):
        return (stage.kind,)
    if isinstance(stage, Softmax):
        return ("log_softmax" if stage.log else "softmax",)
    if isinstance(stage, Norm):
        return (stage.kind,)
    if isinstance(stage, Scan):
        return (stage.kind,)
    if isinstance(stage, Permute):
        return ("transpose" if stage.transpose else "permute", "contiguous")
    if isinstance(stage, Cat):
        return ("cat",)
    if isinstance(stage, IndexSelect):
        return ("index_select",)
    if isinstance(stage, Gather):
        return ("gather",)
    if isinstance(stage, CosineSimilarity):
        return ("cosine_similarity",)
    if isinstance(stage, Loss):
        return (stage.kind,)
    raise TypeError(f"unknown stage {stage!r}")


def output_rank(stage: Stage, rank: int) -> int:
    """The rank of the running value after `stage`, given its rank before."""
    if isinstance(stage, Reduce):
        if stage.dim is None:
            return 0
        return rank if stage.keepdim else rank - 1
    if isinstance(stage, (CosineSimilarity,)):
        return rank - 1
    if isinstance(stage, Loss):
        return 0
    return rank


@dataclasses.dataclass(frozen=True)
class Program:
    dims: tuple[Dim, ...]
    inputs: tuple[TensorInput, ...]
    stages: tuple[Stage, ...]
    dtype: str
    init_args: tuple[InitArg, ...] = ()
    params: tuple[Param, ...] = ()
    description: str = ""  # what the model does, for the docstring ("applies GELU")

    def __post_init__(self) -> None:
        if not self.inputs or not self.stages:
            raise ValueError("a program needs at least one input and one stage")
        keys = [d.key for d in self.dims]
        if len(set(keys)) != len(keys):
            raise ValueError(f"duplicate dim keys: {keys}")
        for tensor in self.inputs:
            for d in tensor.dims:
                if not isinstance(d, int) and d not in keys:
                    raise ValueError(f"input {tensor.name} uses unknown dim {d!r}")
        # Weights are built from __init__ arguments only: the solution module cannot see our constants.
        init_dims = {a.dim for a in self.init_args if a.dim}
        arg_names = {a.name for a in self.init_args}
        for param in self.params:
            missing = [d for d in param.dims if isinstance(d, str) and d not in init_dims]
            if (param.shape_arg and param.shape_arg not in arg_names) or (not param.shape_arg and missing):
                raise ValueError(f"parameter {param.attr} needs __init__ arguments for its shape")

    def dim(self, key: str) -> Dim:
        for d in self.dims:
            if d.key == key:
                return d
        raise KeyError(key)

    def input(self, name: str) -> TensorInput:
        for tensor in self.inputs:
            if tensor.name == name:
                return tensor
        raise KeyError(name)

    @property
    def ops(self) -> tuple[str, ...]:
        return tuple(op for stage in self.stages for op in stage_ops(stage))

    @property
    def fixed_dims(self) -> frozenset[str]:
        """Dims that weights or `__init__` arguments depend on: input sets keep them."""
        fixed: set[str] = set()
        for arg in self.init_args:
            if arg.dim:
                fixed.add(arg.dim)
            fixed.update(d for d in arg.shape or () if isinstance(d, str))
        for param in self.params:
            fixed.update(d for d in param.dims if isinstance(d, str))
        for stage in self.stages:
            if isinstance(stage, Norm):
                fixed.update(stage.norm_dims)
        return frozenset(fixed)

    def size(self, dims: tuple[str | int, ...], sizes: dict[str, int] | None = None) -> tuple[int, ...]:
        table = {d.key: d.size for d in self.dims} | (sizes or {})
        return tuple(d if isinstance(d, int) else table[d] for d in dims)
