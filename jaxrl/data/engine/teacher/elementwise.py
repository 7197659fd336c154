"""An elementwise chain as one kernel: every step in registers, one load per tensor, one store.

Three layouts (the strategy's `elementwise_layout`), all masked and correct for any shape:
- `flat`: the contiguous tensor as one array, one program per BLOCK_SIZE elements;
- `tiled2d`: a 2-D grid of BLOCK_R x BLOCK_C tiles over (rows, last axis), BLOCK_C covering the row up to
  the block size: operands that repeat along rows are indexed by column only;
- `grid_stride`: a fixed number of programs (at most 4 x 32) each looping over blocks spaced by the grid,
  which saves launching many tiny programs when the tensor is large.
"""

from __future__ import annotations

from jaxrl.data.engine.ir import Arith, Operand
from jaxrl.data.engine.teacher.emitter import Emitter, GroupCode, flat_loader
from jaxrl.data.engine.teacher.kernel import BODY, chain, describe
from jaxrl.data.engine.teacher.lower import Group

MAX_PROGRAMS = 128


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
    layout = em.config.elementwise_layout if group.rank >= 2 else "flat"
    block, warps = em.config.elementwise_block, em.config.elementwise_warps
    k = em.kernel(stem)
    k.ptr("x", src)
    out = em.new_value(final)
    em.line(f"{out} = torch.empty_like({src})")
    em.line(f"n_elements = {src}.numel()")
    steps = " -> ".join(describe(group.prologue))
    if layout == "tiled2d":
        k.line("pid_r = tl.program_id(axis=0)")
        k.line("pid_c = tl.program_id(axis=1)")
        k.line("rows = pid_r * BLOCK_R + tl.arange(0, BLOCK_R)")
        k.line("cols = pid_c * BLOCK_C + tl.arange(0, BLOCK_C)")
        k.line("offsets = rows[:, None] * n_cols + cols[None, :]")
        k.line("mask = (rows[:, None] < n_rows) & (cols[None, :] < n_cols)")
        _body(k, group, src)
        k.ptr("out", out)
        k.value("n_rows", "n_rows")
        k.value("n_cols", "n_cols")
        k.constexpr("BLOCK_R", "block_r")
        k.constexpr("BLOCK_C", "block_c")
        em.line(f"n_cols = {src}.shape[-1]")
        em.line("n_rows = n_elements // n_cols")
        em.line(f"block_c = min(triton.next_power_of_2(n_cols), {block})")
        em.line(f"block_r = max({block} // block_c, 1)")
        em.line(k.launch("(triton.cdiv(n_rows, block_r), triton.cdiv(n_cols, block_c))", num_warps=str(warps)))
        plan = (f"One elementwise kernel computes {steps} on 2-D tiles: the contiguous tensor is (rows, last axis), "
                f"each program owns a BLOCK_R x BLOCK_C tile of {block} elements (BLOCK_C the row length rounded up "
                f"to a power of two, at most {block}), masked on both edges, {warps} warps, the math in fp32 "
                "registers and a single store")
    elif layout == "grid_stride":
        k.line("pid = tl.program_id(axis=0)")
        k.line("for i in range(0, n_iters):")
        start = len(k.body)
        k.line("offsets = (pid + i * n_programs) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)")
        k.line("mask = offsets < n_elements")
        _body(k, group, src)
        k.body[start:] = [BODY + line for line in k.body[start:]]
        k.ptr("out", out)
        k.value("n_elements", "n_elements")
        k.value("n_programs", "n_programs")
        k.value("n_iters", "n_iters")
        k.constexpr("BLOCK_SIZE", str(block))
        em.line(f"n_blocks = triton.cdiv(n_elements, {block})")
        em.line(f"n_programs = min(n_blocks, {MAX_PROGRAMS})")
        em.line("n_iters = triton.cdiv(n_blocks, n_programs)")
        em.line(k.launch("(n_programs,)", num_warps=str(warps)))
        plan = (f"One elementwise kernel computes {steps} with a grid-stride loop: at most {MAX_PROGRAMS} programs, "
                f"each walking blocks of {block} elements spaced by the grid (pid, pid + n_programs, ...), masked, "
                f"{warps} warps, the math in fp32 registers and one store per block")
    else:
        k.line("pid = tl.program_id(axis=0)")
        k.line("offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)")
        k.line("mask = offsets < n_elements")
        _body(k, group, src)
        k.ptr("out", out)
        k.value("n_elements", "n_elements")
        k.constexpr("BLOCK_SIZE", str(block))
        em.line(k.launch(f"(triton.cdiv(n_elements, {block}),)", num_warps=str(warps)))
        plan = (f"One elementwise kernel computes {steps}: flatten the contiguous tensor, one program per block of "
                f"{block} elements with a mask on the last partial block, {warps} warps, the math in fp32 registers "
                "and a single store")
    note = broadcast_note(group.prologue, group.rank)
    return GroupCode(out, plan + (f" ({note})" if note else "") + ".")


def _body(k, group: Group, src: str) -> None:
    """Load x at `offsets`, apply the chain (loading operands at the same offsets), store."""
    k.line("x = tl.load(x_ptr + offsets, mask=mask, other=0.0).to(tl.float32)")
    statements = chain(k, group.prologue, "x", flat_loader(k, src, group.rank))
    k.body += statements
    k.line("tl.store(out_ptr + offsets, x.to(out_ptr.dtype.element_ty), mask=mask)")
