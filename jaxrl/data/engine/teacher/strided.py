"""Kernels over an axis that is not the last: the value is seen as (outer, R, inner), contiguous.

A program owns one `outer` index and a block of `inner` positions, and loops over the R positions of
the reduced axis: every load is a contiguous run of `inner` elements (coalesced), and each lane keeps
its own accumulator, so no cross-lane reduction is needed. Reductions store one block, softmax makes a
second pass to write, scans store as they go.
"""

from __future__ import annotations

from jaxrl.data.engine.ir import Reduce, Scalar, Scan, Softmax
from jaxrl.data.engine.teacher.emitter import Emitter, GroupCode
from jaxrl.data.engine.teacher.kernel import Kernel, chain
from jaxrl.data.engine.teacher.rows import BEST_INDEX, NEG_INF, no_operands, sentence

_INIT = {
    "sum": ["acc = tl.zeros([BLOCK_SIZE], dtype=tl.float32)"],
    "mean": ["acc = tl.zeros([BLOCK_SIZE], dtype=tl.float32)"],
    "norm": ["acc = tl.zeros([BLOCK_SIZE], dtype=tl.float32)"],
    "max": [f"acc = tl.full([BLOCK_SIZE], {NEG_INF}, tl.float32)"],
    "min": ['acc = tl.full([BLOCK_SIZE], float("inf"), tl.float32)'],
    "argmax": [f"best = tl.full([BLOCK_SIZE], {NEG_INF}, tl.float32)", BEST_INDEX],
    "argmin": ['best = tl.full([BLOCK_SIZE], float("inf"), tl.float32)', BEST_INDEX],
    "logsumexp": [f"m = tl.full([BLOCK_SIZE], {NEG_INF}, tl.float32)", "s = tl.zeros([BLOCK_SIZE], dtype=tl.float32)"],
}
_UPDATE = {
    "sum": ["acc += x"],
    "mean": ["acc += x"],
    "norm": ["acc += x * x"],
    "max": ["acc = tl.maximum(acc, x)"],
    "min": ["acc = tl.minimum(acc, x)"],
    "argmax": ["take = x > best", "best = tl.where(take, x, best)", "best_idx = tl.where(take, r, best_idx)"],
    "argmin": ["take = x < best", "best = tl.where(take, x, best)", "best_idx = tl.where(take, r, best_idx)"],
    "logsumexp": ["m_new = tl.maximum(m, x)", "s = s * tl.exp(m - m_new) + tl.exp(x - m_new)", "m = m_new"],
}
_FINISH = {
    "sum": ["x = acc"],
    "mean": ["x = acc / R"],
    "norm": ["x = tl.sqrt(acc)"],
    "max": ["x = acc"],
    "min": ["x = acc"],
    "argmax": ["x = best_idx"],
    "argmin": ["x = best_idx"],
    "logsumexp": ["x = m + tl.log(s)"],
}


def _dim_expr(dim: Scalar) -> str:
    return f"self.{dim.init}" if dim.init else str(int(dim.value))


def _kernel(em: Emitter, stem: str, src: str) -> Kernel:
    k = em.kernel(stem)
    k.ptr("x", src)
    k.line("pid_outer = tl.program_id(0)")
    k.line("offs = tl.program_id(1) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)")
    k.line("mask = offs < inner")
    k.line("base = pid_outer * R * inner + offs")
    return k


def _load(k: Kernel, group) -> None:
    k.line("    x = tl.load(x_ptr + base + r * inner, mask=mask, other=0.0).to(tl.float32)")
    k.body += ["    " + s for s in chain(k, group.prologue, "x", no_operands)]


def _launch(em: Emitter, k: Kernel, src: str, out: str, alloc: str, dim: Scalar) -> None:
    k.ptr("out", out)
    k.value("R", "R")
    k.value("inner", "inner")
    k.constexpr("BLOCK_SIZE", "BLOCK_SIZE")
    em.line(f"d = {_dim_expr(dim)}")
    em.line(f"R = {src}.shape[d]")
    em.line(f"inner = {src}.stride(d)")
    em.line(f"outer = {src}.numel() // (R * inner)")
    em.line(f"{out} = {alloc}")
    em.line(f"BLOCK_SIZE = min(triton.next_power_of_2(inner), {em.config.reduce_block})")
    em.line(k.launch("(outer, triton.cdiv(inner, BLOCK_SIZE))"))


_LAYOUT = "each load is a contiguous run along the inner axes, so the strided axis costs no uncoalesced reads"


def write_strided_reduce(em: Emitter, group, src: str, stem: str, final: bool) -> GroupCode:
    core: Reduce = group.core
    k = _kernel(em, stem, src)
    k.body += _INIT[core.kind]
    k.line("for r in range(0, R):")
    _load(k, group)
    k.body += ["    " + s for s in _UPDATE[core.kind]]
    k.body += _FINISH[core.kind]
    k.body += chain(k, group.epilogue, "x", no_operands)
    k.line("tl.store(out_ptr + pid_outer * inner + offs, x.to(out_ptr.dtype.element_ty), mask=mask)")
    out = em.new_value(final)
    index = core.kind in ("argmax", "argmin")
    kept = " + (1,)" if core.keepdim else ""
    shape = f"{src}.shape[:d]{kept} + {src}.shape[d + 1:]"
    dtype = "torch.int64" if index else f"{src}.dtype"
    _launch(em, k, src, out, f"torch.empty({shape}, device={src}.device, dtype={dtype})", core.dim)
    return GroupCode(out, sentence(f"View the input as (outer, R, inner) around the reduced axis; a program owns a "
                                    f"block of inner positions and loops over R with a per-lane fp32 {core.kind} "
                                    f"accumulator", group, _LAYOUT))


def write_strided_softmax(em: Emitter, group, src: str, stem: str, final: bool) -> GroupCode:
    core: Softmax = group.core
    k = _kernel(em, stem, src)
    k.line(f"m = tl.full([BLOCK_SIZE], {NEG_INF}, tl.float32)")
    k.line("s = tl.zeros([BLOCK_SIZE], dtype=tl.float32)")
    k.line("for r in range(0, R):")
    _load(k, group)
    k.body += ["    m_new = tl.maximum(m, x)", "    s = s * tl.exp(m - m_new) + tl.exp(x - m_new)", "    m = m_new"]
    k.line("for r in range(0, R):")
    _load(k, group)
    k.line("    x = x - m - tl.log(s)" if core.log else "    x = tl.exp(x - m) / s")
    k.body += ["    " + s for s in chain(k, group.epilogue, "x", no_operands)]
    k.line("    tl.store(out_ptr + base + r * inner, x.to(out_ptr.dtype.element_ty), mask=mask)")
    out = em.new_value(final)
    _launch(em, k, src, out, f"torch.empty_like({src})", core.dim)
    name = "log-softmax" if core.log else "softmax"
    head = (f"View the input as (outer, R, inner) around the {name} axis; a program owns a block of inner "
            f"positions, makes one pass over R for the running max and sum of exponentials (online, fp32) and a "
            f"second pass to write")
    return GroupCode(out, sentence(head, group, _LAYOUT))


def write_strided_scan(em: Emitter, group, src: str, stem: str, final: bool) -> GroupCode:
    core: Scan = group.core
    k = _kernel(em, stem, src)
    init = {"cumsum": "tl.zeros([BLOCK_SIZE], dtype=tl.float32)", "cumprod": "tl.full([BLOCK_SIZE], 1.0, tl.float32)",
            "cummax": f"tl.full([BLOCK_SIZE], {NEG_INF}, tl.float32)"}[core.kind]
    update = {"cumsum": "acc = acc + x", "cumprod": "acc = acc * x", "cummax": "acc = tl.maximum(acc, x)"}[core.kind]
    k.line(f"acc = {init}")
    k.line("for r in range(0, R):")
    _load(k, group)
    k.line(f"    {update}")
    k.line("    x = acc")
    k.body += ["    " + s for s in chain(k, group.epilogue, "x", no_operands)]
    k.line("    tl.store(out_ptr + base + r * inner, x.to(out_ptr.dtype.element_ty), mask=mask)")
    out = em.new_value(final)
    _launch(em, k, src, out, f"torch.empty_like({src})", core.dim)
    head = (f"View the input as (outer, R, inner) around the scanned axis; a program owns a block of inner "
            f"positions and walks R in order with a running fp32 {core.kind[3:]}, storing each step")
    return GroupCode(out, sentence(head, group, _LAYOUT))
