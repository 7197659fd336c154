"""From a Program's stages to kernel groups: what the teacher fuses.

A group is one core (a matmul, a row operation, a reduction, a scan, a data movement) with the
elementwise steps fused before it (prologue, applied as values are loaded) and after it (epilogue,
applied before the single store), or a pure elementwise chain. Each core says which elementwise steps
it can take: a matmul takes its bias, activations and per-column vectors in the epilogue; a row kernel
takes scalar steps before and vectors along the row after; a reduction takes scalar steps on both
sides. Anything else starts a new kernel.

Losses are lowered here to their elementwise term and a full reduction, so that MSE, L1, Huber and KL
divergence share one reduction kernel.
"""

from __future__ import annotations

import dataclasses
from typing import Literal

from jaxrl.data.engine.ir import (
    Arith,
    Cat,
    CosineSimilarity,
    Gather,
    IndexSelect,
    Linear,
    Loss,
    MatMul,
    Norm,
    Operand,
    Permute,
    Pointwise,
    Program,
    Reduce,
    Scalar,
    Scan,
    Softmax,
    Stage,
    output_rank,
)
from jaxrl.data.engine.teacher.kernel import Elementwise, Term


@dataclasses.dataclass(frozen=True)
class FullReduce:
    """Sum of all elements times 1/n (mean), 1 (sum) or 1/size(0) (batchmean): a 0-d result."""

    mode: Literal["sum", "mean", "batchmean"]


@dataclasses.dataclass(frozen=True)
class CrossEntropyRows:
    """Per-row cross entropy (logsumexp minus the target's logit) into a float32 buffer."""

    target: str


Core = (
    Linear | MatMul | Reduce | Softmax | Norm | Scan | Permute | Cat | IndexSelect | Gather | CosineSimilarity
    | FullReduce | CrossEntropyRows
)

LOSS_TERMS: dict[str, tuple[str, ...]] = {
    "mse_loss": ("{x} = {x} - {y}", "{x} = {x} * {x}"),
    "l1_loss": ("{x} = tl.abs({x} - {y})",),
    "huber_loss": ("{x} = {x} - {y}", "{t} = tl.abs({x})",
                   "{x} = tl.where({t} < {delta}, 0.5 * {x} * {x}, {delta} * ({t} - 0.5 * {delta}))"),
    # F.kl_div(input, target) = target * (log(target) - input), input being log-probabilities
    "kl_div": ("{x} = {y} * (tl.log({y}) - {x})",),
}


@dataclasses.dataclass
class Group:
    core: Core | None  # None: an elementwise chain
    rank: int  # rank of the value entering the group
    prologue: list[Elementwise] = dataclasses.field(default_factory=list)
    epilogue: list[Elementwise] = dataclasses.field(default_factory=list)

    @property
    def out_rank(self) -> int:
        if self.core is None:
            return self.rank
        if isinstance(self.core, FullReduce):
            return 0
        if isinstance(self.core, CrossEntropyRows):
            return 1
        return output_rank(self.core, self.rank)


def expand(program: Program) -> list[Stage | FullReduce | CrossEntropyRows | Term]:
    """Stages with losses and whole-tensor reductions in teacher form."""
    out: list = []
    for stage in program.stages:
        if isinstance(stage, Loss):
            mode = stage.reduction
            if stage.kind == "cross_entropy":
                out += [CrossEntropyRows(stage.target), FullReduce(mode)]
                continue
            params = (("delta", stage.delta),) if stage.delta is not None else ()
            out += [Term(stage.kind, LOSS_TERMS[stage.kind], Operand(stage.target, "input"), params), FullReduce(mode)]
        elif isinstance(stage, Reduce) and stage.dim is None:
            out.append(FullReduce(stage.kind))
        else:
            out.append(stage)
    return out


def is_last_dim(dim: Scalar, rank: int) -> bool:
    return int(dim.value) in (-1, rank - 1)


def _scalar_only(step: Elementwise) -> bool:
    if isinstance(step, Pointwise):
        return True
    if isinstance(step, Arith):
        return isinstance(step.other, Scalar)
    return False


def _scalar_row_or_full(step: Elementwise, rank: int) -> bool:
    """Scalars, vectors along the last axis, and tensors of the value's own shape."""
    if _scalar_only(step):
        return True
    return isinstance(step, Arith) and step.other.axes in (None, (rank - 1, rank))


def accepts_prologue(core: Core, step: Elementwise) -> bool:
    """Whole-tensor reductions take any elementwise term (flat indexing, like an elementwise kernel); row and
    strided kernels take steps without tensors; matmuls and data movement take none."""
    if isinstance(core, FullReduce):
        return True
    if isinstance(core, (Softmax, Norm, Reduce, Scan)):
        return _scalar_only(step)
    return False


def accepts_epilogue(core: Core, step: Elementwise, rank_out: int) -> bool:
    """Matmuls and whole-row kernels (norms, last-axis softmax) index output columns and rows, so they take
    per-column vectors and full tensors too; every other core takes steps without tensors."""
    if isinstance(core, (Linear, MatMul, Norm)) or isinstance(core, Softmax) and is_last_dim(core.dim, rank_out):
        return _scalar_row_or_full(step, rank_out)
    return _scalar_only(step)


def group_stages(program: Program) -> list[Group]:
    """The kernels of the teacher's solution, in launch order."""
    groups: list[Group] = []
    rank = program.inputs[0].rank
    for stage in expand(program):
        current = groups[-1] if groups else None
        if isinstance(stage, (Pointwise, Arith, Term)):
            if current is not None and current.core is None:
                current.prologue.append(stage)
            elif current is not None and accepts_epilogue(current.core, stage, rank):
                current.epilogue.append(stage)
            else:
                groups.append(Group(None, rank, prologue=[stage]))
            continue
        if (
            current is not None
            and current.core is None
            and all(accepts_prologue(stage, step) for step in current.prologue)
        ):
            current.core = stage
        else:
            groups.append(Group(stage, rank))
        rank = groups[-1].out_rank
    return groups
