"""A reduction of a whole tensor to one number (torch.mean(x), the losses), in two deterministic stages.

Stage one: one program per block computes the fused elementwise term (e.g. (pred - target)^2) and writes
the block's fp32 sum. Stage two: a single program adds the partial sums in a fixed order and scales by
1/n (mean), 1 (sum) or 1/batch (batchmean). No atomics, so the result is the same on every run.
"""

from __future__ import annotations

from jaxrl.data.engine.teacher.emitter import Emitter, GroupCode, flat_loader
from jaxrl.data.engine.teacher.kernel import chain, describe
from jaxrl.data.engine.teacher.lower import FullReduce, Group
from jaxrl.data.engine.teacher.rows import no_operands

FINISH_BLOCK = 1024


def write_full_reduce(em: Emitter, group: Group, src: str, stem: str, final: bool) -> GroupCode:
    core: FullReduce = group.core
    block = em.config.elementwise_block
    part = em.kernel(f"{stem}_partial")
    part.ptr("x", src)
    part.line("pid = tl.program_id(axis=0)")
    part.line("offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)")
    part.line("mask = offsets < n_elements")
    part.line("x = tl.load(x_ptr + offsets, mask=mask, other=0.0).to(tl.float32)")
    part.body += chain(part, group.prologue, "x", flat_loader(part, src, group.rank))
    if group.prologue:
        part.line("x = tl.where(mask, x, 0.0)")
    part.line("tl.store(partial_ptr + pid, tl.sum(x, axis=0))")
    part.ptr("partial", "partials")
    part.value("n_elements", "n_elements")
    part.constexpr("BLOCK_SIZE", str(block))

    finish = em.kernel(f"{stem}_finish")
    finish.ptr("partial", "partials")
    finish.line("offs = tl.arange(0, BLOCK_SIZE)")
    finish.line("acc = tl.zeros([BLOCK_SIZE], dtype=tl.float32)")
    finish.line("for start in range(0, n_partials, BLOCK_SIZE):")
    finish.line("    acc += tl.load(partial_ptr + start + offs, mask=start + offs < n_partials, other=0.0)")
    finish.line("x = tl.sum(acc, axis=0) * inv_count")
    finish.body += chain(finish, group.epilogue, "x", no_operands)
    finish.line("tl.store(out_ptr, x.to(out_ptr.dtype.element_ty))")
    out = em.new_value(final)
    finish.ptr("out", out)
    finish.value("n_partials", "n_partials")
    inv_count = {"sum": "1.0", "mean": "1.0 / n_elements", "batchmean": f"1.0 / {src}.shape[0]"}[core.mode]
    finish.value("inv_count", inv_count)
    finish.constexpr("BLOCK_SIZE", str(FINISH_BLOCK))

    em.line(f"n_elements = {src}.numel()")
    em.line(f"n_partials = triton.cdiv(n_elements, {block})")
    em.line(f"partials = torch.empty(n_partials, device={src}.device, dtype=torch.float32)")
    em.line(part.launch("(n_partials,)"))
    em.line(f"{out} = torch.empty((), device={src}.device, dtype={em.torch_dtype})")
    em.line(finish.launch("(1,)"))
    term = f" of {' -> '.join(describe(group.prologue))}" if group.prologue else ""
    scale = {"sum": "", "mean": " and divides by the element count", "batchmean": " and divides by the batch size"}
    return GroupCode(out, f"Reduce the whole tensor{term} in two passes: one program per block of {block} elements "
                          f"writes an fp32 partial sum, then a single program adds the partials in order"
                          f"{scale[core.mode]} (deterministic, no atomics).")
