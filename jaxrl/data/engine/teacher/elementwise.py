"""An elementwise chain as one flat kernel: every step in registers, one load per tensor, one store."""

from __future__ import annotations

from jaxrl.data.engine.ir import Arith, Operand
from jaxrl.data.engine.teacher.emitter import Emitter, GroupCode, flat_loader
from jaxrl.data.engine.teacher.kernel import chain, describe
from jaxrl.data.engine.teacher.lower import Group


def broadcast_note(group_steps, rank: int) -> str:
    """How broadcast operands are indexed, for the plan."""
    notes = []
    for step in group_steps:
        if isinstance(step, Arith) and isinstance(step.other, Operand) and step.other.axes is not None:
            start, stop = step.other.axes
            if stop == rank:
                notes.append(f"{step.other.name} repeats along the leading axes, so it is read at offsets % its size")
            else:
                notes.append(f"{step.other.name} spans axes {start}..{stop - 1}, so it is read at "
                             f"(offsets // inner) % its size, inner being the stride of axis {stop - 1}")
    return "; ".join(notes)


def write_elementwise(em: Emitter, group: Group, src: str, stem: str, final: bool) -> GroupCode:
    block = em.config.elementwise_block
    k = em.kernel(stem)
    k.ptr("x", src)
    k.line("pid = tl.program_id(axis=0)")
    k.line("offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)")
    k.line("mask = offsets < n_elements")
    k.line("x = tl.load(x_ptr + offsets, mask=mask, other=0.0).to(tl.float32)")
    statements = chain(k, group.prologue, "x", flat_loader(k, src, group.rank))
    k.body += statements
    k.line("tl.store(out_ptr + offsets, x.to(out_ptr.dtype.element_ty), mask=mask)")
    out = em.new_value(final)
    k.ptr("out", out)
    k.value("n_elements", "n_elements")
    k.constexpr("BLOCK_SIZE", str(block))
    em.line(f"{out} = torch.empty_like({src})")
    em.line(f"n_elements = {src}.numel()")
    em.line(k.launch(f"(triton.cdiv(n_elements, {block}),)"))
    steps = " -> ".join(describe(group.prologue))
    plan = (f"One elementwise kernel computes {steps}: flatten the contiguous tensor, one program per block of "
            f"{block} elements with a mask on the last partial block, the math in fp32 registers and a single store")
    note = broadcast_note(group.prologue, group.rank)
    return GroupCode(out, plan + (f" ({note})" if note else "") + ".")
