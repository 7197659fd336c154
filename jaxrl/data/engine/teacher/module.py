"""The teacher's answer for a Program: the complete ModelNew module and the plan paragraph.

`ModelNew.__init__` takes the reference's arguments and repeats the reference's statements that create
weights, in the same order (so the same seed gives the same weights; the nn layers are kept as holders
and never called), and stores its numbers. `forward` only makes inputs contiguous, allocates, reads
shapes and strides, takes views and launches the kernels of each group from `lower.group_stages`.
"""

from __future__ import annotations

import random

from jaxrl.data.engine.ir import (
    Cat,
    CosineSimilarity,
    Gather,
    IndexSelect,
    Linear,
    MatMul,
    Norm,
    Permute,
    Program,
    Reduce,
    Scan,
    Softmax,
)
from jaxrl.data.engine.render import Reference
from jaxrl.data.engine.tasks import TeacherSolution
from jaxrl.data.engine.teacher import elementwise, layout, matmul, reduce_all, rows, strided
from jaxrl.data.engine.teacher.emitter import Emitter, GroupCode, Scale, draw_strategy
from jaxrl.data.engine.teacher.plan import write_plan
from jaxrl.data.engine.teacher.kernel import Elementwise, Term
from jaxrl.data.engine.teacher.lower import CrossEntropyRows, FullReduce, Group, group_stages, is_last_dim

HEADER = "import torch\nimport torch.nn as nn\nimport triton\nimport triton.language as tl\n"


def _writer(group: Group):
    core = group.core
    if core is None:
        return elementwise.write_elementwise
    if isinstance(core, (Linear, MatMul)):
        return matmul.write_matmul
    if isinstance(core, Norm):
        return rows.write_row_whole
    if isinstance(core, Softmax):
        return rows.write_row_whole if is_last_dim(core.dim, group.rank) else strided.write_strided_softmax
    if isinstance(core, Reduce):
        return rows.write_row_reduce if is_last_dim(core.dim, group.rank) else strided.write_strided_reduce
    if isinstance(core, Scan):
        return rows.write_row_scan if is_last_dim(core.dim, group.rank) else strided.write_strided_scan
    if isinstance(core, FullReduce):
        return reduce_all.write_full_reduce
    if isinstance(core, CrossEntropyRows):
        return rows.write_cross_entropy
    if isinstance(core, CosineSimilarity):
        return rows.write_cosine
    if isinstance(core, Permute):
        return layout.write_permute
    if isinstance(core, Cat):
        return layout.write_cat
    if isinstance(core, (IndexSelect, Gather)):
        return layout.write_index
    raise TypeError(f"no kernel writer for {core!r}")


def _step_names(steps: list[Elementwise]) -> list[str]:
    return [s.name if isinstance(s, Term) else s.op for s in steps]


_CORE_NAMES = {Linear: "linear", MatMul: "matmul", Cat: "cat_copy", IndexSelect: "index_select", Gather: "gather",
               CosineSimilarity: "cosine_similarity", CrossEntropyRows: "cross_entropy_rows"}


def _core_name(core) -> str:
    if isinstance(core, Softmax):
        return "log_softmax" if core.log else "softmax"
    if isinstance(core, Reduce):
        return f"{core.kind}_reduce"
    if isinstance(core, (Norm, Scan)):
        return core.kind
    if isinstance(core, Permute):
        return "transpose" if core.transpose else "permute"
    if isinstance(core, FullReduce):
        return f"{core.mode}_reduce"
    return _CORE_NAMES[type(core)]


def stem(group: Group) -> str:
    """A kernel's name from what it computes: relu, fused_mul_add_relu, linear_gelu, sum_reduce..."""
    if group.core is None:
        names = _step_names(group.prologue)
        return names[0] if len(names) == 1 else "fused_" + "_".join(names[:3])
    base = _core_name(group.core)
    extra = _step_names(group.prologue)[:1] + _step_names(group.epilogue)[:2]
    return "_".join([base] + extra) if extra and not isinstance(group.core, FullReduce) else base


def unfuse(groups: list[Group]) -> list[Group]:
    """The same computation with every elementwise prologue and epilogue in a kernel of its own."""
    out: list[Group] = []
    for group in groups:
        if group.core is None or not (group.prologue or group.epilogue):
            out.append(group)
            continue
        if group.prologue:
            out.append(Group(None, group.rank, prologue=list(group.prologue)))
        out.append(Group(group.core, group.rank))
        if group.epilogue:
            out.append(Group(None, out[-1].out_rank, prologue=list(group.epilogue)))
    return out


class NoTemplate(Exception):
    """The teacher has no template for one of the program's operators (by design, not a bug): the data
    engine asks TorchInductor for the solution instead."""


UNTEMPLATED = {Reduce: ("var", "std"), Scan: ("cummin", "logcumsumexp")}
UNTEMPLATED_OPS = frozenset(kind for kinds in UNTEMPLATED.values() for kind in kinds)


def write_solution(program: Program, reference: Reference, scale: str, rng: random.Random | None = None,
                   config: Scale | None = None) -> TeacherSolution:
    """The plan and ModelNew for `program`: the canonical strategy, `config`, or one drawn from `rng`
    (`emitter.draw_strategy`: layouts, blocks, warps, tile order, fusion; the plan's phrasing too)."""
    missing = sorted({s.kind for s in program.stages if getattr(s, "kind", None) in UNTEMPLATED.get(type(s), ())})
    if missing:
        raise NoTemplate(f"no teacher template for {', '.join(missing)}")
    if config is None and rng is not None:
        config = draw_strategy(scale, program.dtype, rng)
    em = Emitter(program, scale, config)
    for tensor in program.inputs:
        em.line(f"{tensor.name} = {tensor.name}.contiguous()")
    fused = group_stages(program)
    groups = fused if em.config.fuse else unfuse(fused)
    value = program.inputs[0].name
    codes = []
    for index, group in enumerate(groups):
        code = _writer(group)(em, group, value, stem(group), index == len(groups) - 1)
        codes.append(code)
        value = code.out
    if value != "out":
        em.line(f"out = {value}")
    em.line("return out")

    args = ", ".join(("self",) + reference.init_args)
    init = ["super().__init__()"] + [line.text for line in reference.init_lines if line.solution_keeps]
    forward_args = ", ".join(("self",) + tuple(t.name for t in program.inputs))
    body = "\n".join(f"        {line}" for line in em.forward)
    cls = (
        "class ModelNew(nn.Module):\n"
        f"    def __init__({args}):\n" + "".join(f"        {line}\n" for line in init) + "\n"
        f"    def forward({forward_args}):\n{body}\n"
    )
    parts = [HEADER] + em.helpers + [k.source() for k in em.kernels] + [cls]
    code = "\n\n".join(part.rstrip("\n") + "\n" for part in parts)
    plan = write_plan(program, [c.plan for c in codes], len(em.kernels), em.config, len(groups) > len(fused), rng)
    return TeacherSolution(plan=plan, code=code)
