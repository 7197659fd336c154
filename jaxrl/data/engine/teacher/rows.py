"""Kernels over the last axis: one program per row.

Softmax, log-softmax and the norms hold a whole row in registers (BLOCK_SIZE = next_power_of_2 of the
row length, masked), which is the fastest layout for rows up to a few thousand elements. Reductions,
scans and cross entropy stream the row in chunks with running accumulators, so any row length works.
Prologue steps run on each loaded chunk, epilogue steps on the result before the store.
"""

from __future__ import annotations

from jaxrl.data.engine.ir import Norm, Operand, Reduce, Scan, Softmax
from jaxrl.data.engine.teacher.emitter import Emitter, GroupCode
from jaxrl.data.engine.teacher.kernel import Kernel, chain, describe
from jaxrl.data.engine.teacher.lower import CrossEntropyRows, Group

NEG_INF = 'float("-inf")'
BEST_INDEX = "best_idx = tl.zeros([BLOCK_SIZE], dtype=tl.int32)"
# Start of a running maximum in chunked loops: finite, so that a lane no element reached gives exp(0) * 0.
LOW = "-1.0e38"

MAX_COMBINE = '''@triton.jit
def _max_combine(a, b):
    return tl.maximum(a, b)
'''
MUL_COMBINE = '''@triton.jit
def _mul_combine(a, b):
    return a * b
'''


def row_loader(k: Kernel):
    """Operands of a row kernel: full-shape tensors, or vectors along the last axis (read at cols % size, since
    a norm's row may span more than the last axis)."""
    loaded: dict[str, str] = {}

    def load(operand: Operand) -> str:
        if operand.name not in loaded:
            register = Emitter.register(operand.name)
            expr = Emitter.operand_expr(operand)
            ptr = k.ptr(register, expr)
            if operand.axes is None:
                index = "row * n_cols + cols"
            else:
                index = f"cols % {k.value(f'{operand.name}_numel', f'{expr}.numel()')}"
            k.line(f"{register} = tl.load({ptr} + {index}, mask=mask, other=0.0).to(tl.float32)")
            loaded[operand.name] = register
        return loaded[operand.name]

    return load


def no_operands(operand: Operand) -> str:
    raise ValueError(f"operand {operand.name} cannot be fused here")


def _prepare_rows(em: Emitter, src: str, n_cols: str) -> None:
    em.line(f"n_cols = {n_cols}")
    em.line(f"x2 = {src}.reshape(-1, n_cols)")
    em.line("n_rows = x2.shape[0]")


def write_row_whole(em: Emitter, group: Group, src: str, stem: str, final: bool) -> GroupCode:
    """softmax / log_softmax / layer_norm / rms_norm with the row in registers."""
    core = group.core
    k = em.kernel(stem)
    k.ptr("x", "x2")
    k.line("row = tl.program_id(0)")
    k.line("cols = tl.arange(0, BLOCK_SIZE)")
    k.line("mask = cols < n_cols")
    k.line("x = tl.load(x_ptr + row * n_cols + cols, mask=mask, other=0.0).to(tl.float32)")
    k.body += chain(k, group.prologue, "x", no_operands)
    if isinstance(core, Softmax):
        n_cols = f"{src}.shape[-1]"
        k.line(f"x = tl.where(mask, x, {NEG_INF})")
        if core.log:
            k.line("x = x - tl.max(x, axis=0)")
            k.line("x = x - tl.log(tl.sum(tl.exp(x), axis=0))")
        else:
            k.line("x = tl.exp(x - tl.max(x, axis=0))")
            k.line("x = x / tl.sum(x, axis=0)")
        what = f"{'log-' if core.log else ''}softmax over the last axis: max, exp and sum of the row in fp32"
    else:
        assert isinstance(core, Norm)
        weight = f"self.{core.attr}.weight" if core.module else f"self.{core.weight_attr}"
        n_cols = f"{weight}.numel()"
        if group.prologue:
            k.line("x = tl.where(mask, x, 0.0)")
        k.ptr("w", weight)
        if core.kind == "layer_norm":
            bias = f"self.{core.attr}.bias" if core.module else f"self.{core.bias_attr}"
            k.ptr("b", bias)
            k.line("mean = tl.sum(x, axis=0) / n_cols")
            k.line("diff = tl.where(mask, x - mean, 0.0)")
            k.line("var = tl.sum(diff * diff, axis=0) / n_cols")
            k.line(f"rstd = 1.0 / tl.sqrt(var + {core.eps!r})")
            k.line("w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)")
            k.line("b = tl.load(b_ptr + cols, mask=mask, other=0.0).to(tl.float32)")
            k.line("x = diff * rstd * w + b")
            what = "layer norm of each row: mean, then variance of the centred row, both in fp32, then scale and shift"
        else:
            k.line("w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)")
            k.line(f"x = x / tl.sqrt(tl.sum(x * x, axis=0) / n_cols + {core.eps!r}) * w")
            what = "RMS norm of each row: the mean of squares in fp32, then x / sqrt(ms + eps) * weight"
    k.body += chain(k, group.epilogue, "x", row_loader(k))
    k.line("tl.store(out_ptr + row * n_cols + cols, x.to(out_ptr.dtype.element_ty), mask=mask)")
    out = em.new_value(final)
    k.ptr("out", out)
    k.value("n_cols", "n_cols")
    k.constexpr("BLOCK_SIZE", "BLOCK_SIZE")
    _prepare_rows(em, src, n_cols)
    em.line(f"{out} = torch.empty_like(x2)")
    em.line("BLOCK_SIZE = triton.next_power_of_2(n_cols)")
    warps = em.config.elementwise_warps  # the canonical 4 scales with the row; another choice is kept as drawn
    em.line("num_warps = 8 if BLOCK_SIZE >= 2048 else 4" if warps == 4 else f"num_warps = {warps}")
    em.line(k.launch("(n_rows,)", num_warps="num_warps"))
    em.line(f"{out} = {out}.view({src}.shape)")
    layout = "the whole row sits in registers (BLOCK_SIZE = next_power_of_2 of its length, masked)"
    return GroupCode(out, sentence(f"One program per row computes the {what}", group, layout))


def sentence(head: str, group: Group, layout: str) -> str:
    parts = [head]
    if group.prologue:
        parts.append(f"applying {' -> '.join(describe(group.prologue))} as each value is loaded")
    if group.epilogue:
        parts.append(f"and {' -> '.join(describe(group.epilogue))} before the store")
    return ", ".join(parts) + f"; {layout}."


# ----------------------------------------------------------------------------- streamed rows
_INIT = {
    "sum": ["acc = tl.zeros([BLOCK_SIZE], dtype=tl.float32)"],
    "mean": ["acc = tl.zeros([BLOCK_SIZE], dtype=tl.float32)"],
    "norm": ["acc = tl.zeros([BLOCK_SIZE], dtype=tl.float32)"],
    "max": [f"acc = tl.full([BLOCK_SIZE], {NEG_INF}, tl.float32)"],
    "min": ['acc = tl.full([BLOCK_SIZE], float("inf"), tl.float32)'],
    "argmax": [f"best = tl.full([BLOCK_SIZE], {NEG_INF}, tl.float32)", BEST_INDEX],
    "argmin": ['best = tl.full([BLOCK_SIZE], float("inf"), tl.float32)', BEST_INDEX],
    "logsumexp": [f"m = tl.full([BLOCK_SIZE], {LOW}, tl.float32)", "s = tl.zeros([BLOCK_SIZE], dtype=tl.float32)"],
}


def _row_update(kind: str) -> list[str]:
    if kind in ("sum", "mean"):
        return ["acc += tl.where(mask, x, 0.0)"]
    if kind == "norm":
        return ["acc += tl.where(mask, x * x, 0.0)"]
    if kind == "max":
        return [f"acc = tl.maximum(acc, tl.where(mask, x, {NEG_INF}))"]
    if kind == "min":
        return ['acc = tl.minimum(acc, tl.where(mask, x, float("inf")))']
    if kind in ("argmax", "argmin"):
        fill, cmp = (NEG_INF, ">") if kind == "argmax" else ('float("inf")', "<")
        # strict comparison: a lane keeps its first best, as torch returns the first index of the extreme
        return [f"x = tl.where(mask, x, {fill})", f"take = x {cmp} best", "best = tl.where(take, x, best)",
                "best_idx = tl.where(take, cols, best_idx)"]
    if kind == "logsumexp":
        return [f"x = tl.where(mask, x, {NEG_INF})", "m_new = tl.maximum(m, x)",
                "s = s * tl.exp(m - m_new) + tl.exp(x - m_new)", "m = m_new"]
    raise ValueError(kind)


def _row_finish(kind: str, count: str) -> list[str]:
    return {
        "sum": ["x = tl.sum(acc, axis=0)"],
        "mean": [f"x = tl.sum(acc, axis=0) / {count}"],
        "norm": ["x = tl.sqrt(tl.sum(acc, axis=0))"],
        "max": ["x = tl.max(acc, axis=0)"],
        "min": ["x = tl.min(acc, axis=0)"],
        # the smallest index among the lanes holding the extreme: torch's first occurrence
        "argmax": ["top = tl.max(best, axis=0)", f"x = tl.min(tl.where(best == top, best_idx, {count}), axis=0)"],
        "argmin": ["top = tl.min(best, axis=0)", f"x = tl.min(tl.where(best == top, best_idx, {count}), axis=0)"],
        "logsumexp": ["m_row = tl.max(m, axis=0)", "x = m_row + tl.log(tl.sum(s * tl.exp(m - m_row), axis=0))"],
    }[kind]


def _streamed(em: Emitter, stem: str) -> Kernel:
    k = em.kernel(stem)
    k.ptr("x", "x2")
    k.line("row = tl.program_id(0)")
    k.line("offs = tl.arange(0, BLOCK_SIZE)")
    return k


def _loop_head(k: Kernel, group: Group, other: str = "0.0") -> None:
    k.line("for start in range(0, n_cols, BLOCK_SIZE):")
    k.line("    cols = start + offs")
    k.line("    mask = cols < n_cols")
    k.line(f"    x = tl.load(x_ptr + row * n_cols + cols, mask=mask, other={other}).to(tl.float32)")
    k.body += ["    " + s for s in chain(k, group.prologue, "x", no_operands)]


def _launch_streamed(em: Emitter, k: Kernel, src: str, out: str, out_alloc: str, block_cap: int) -> None:
    k.ptr("out", out)
    k.value("n_cols", "n_cols")
    k.constexpr("BLOCK_SIZE", "BLOCK_SIZE")
    _prepare_rows(em, src, f"{src}.shape[-1]")
    em.line(f"{out} = {out_alloc}")
    em.line(f"BLOCK_SIZE = min(triton.next_power_of_2(n_cols), {block_cap})")
    em.line(k.launch("(n_rows,)", num_warps=str(em.config.elementwise_warps)))


def write_row_reduce(em: Emitter, group: Group, src: str, stem: str, final: bool) -> GroupCode:
    core: Reduce = group.core
    k = _streamed(em, stem)
    k.body += _INIT[core.kind]
    _loop_head(k, group)
    k.body += ["    " + line for line in _row_update(core.kind)]
    k.body += _row_finish(core.kind, "n_cols")
    k.body += chain(k, group.epilogue, "x", no_operands)
    k.line("tl.store(out_ptr + row, x.to(out_ptr.dtype.element_ty))")
    out = em.new_value(final)
    index = core.kind in ("argmax", "argmin")
    dtype = "torch.int64" if index else f"{src}.dtype"
    alloc = f"torch.empty(n_rows, device={src}.device, dtype={dtype})"
    _launch_streamed(em, k, src, out, alloc, em.config.reduce_block)
    shape = f"{src}.shape[:-1] + (1,)" if core.keepdim else f"{src}.shape[:-1]"
    em.line(f"{out} = {out}.view({shape})")
    what = {"sum": "sum", "mean": "mean", "norm": "L2 norm (sum of squares, then sqrt)", "max": "maximum",
            "min": "minimum", "argmax": "index of the maximum (first one on ties)",
            "argmin": "index of the minimum (first one on ties)", "logsumexp": "log-sum-exp with a running max"}
    return GroupCode(out, sentence(f"One program per row streams the last axis in chunks of BLOCK_SIZE and keeps a "
                                    f"per-lane fp32 accumulator for the {what[core.kind]}", group,
                                    "lanes are combined once at the end, so any row length works"))


_SCAN_INIT = {"cumsum": "tl.zeros([1], dtype=tl.float32)", "cumprod": "tl.full([1], 1.0, tl.float32)",
              "cummax": f"tl.full([1], {NEG_INF}, tl.float32)"}
_SCAN_NEUTRAL = {"cumsum": "0.0", "cumprod": "1.0", "cummax": NEG_INF}


def write_row_scan(em: Emitter, group: Group, src: str, stem: str, final: bool) -> GroupCode:
    core: Scan = group.core
    k = _streamed(em, stem)
    k.line(f"carry = {_SCAN_INIT[core.kind]}")
    _loop_head(k, group)
    k.line(f"    x = tl.where(mask, x, {_SCAN_NEUTRAL[core.kind]})")
    if core.kind == "cumsum":
        k.body += ["    total = tl.sum(x, axis=0)", "    x = tl.cumsum(x, axis=0) + carry", "    carry += total"]
    elif core.kind == "cumprod":
        add_helper(em, MUL_COMBINE)
        k.body += ["    total = tl.reduce(x, 0, _mul_combine)", "    x = tl.cumprod(x, axis=0) * carry",
                   "    carry *= total"]
    else:
        add_helper(em, MAX_COMBINE)
        k.body += ["    total = tl.max(x, axis=0)",
                   "    x = tl.maximum(tl.associative_scan(x, 0, _max_combine), carry)",
                   "    carry = tl.maximum(carry, total)"]
    k.body += ["    " + s for s in chain(k, group.epilogue, "x", no_operands)]
    k.line("    tl.store(out_ptr + row * n_cols + cols, x.to(out_ptr.dtype.element_ty), mask=mask)")
    out = em.new_value(final)
    _launch_streamed(em, k, src, out, "torch.empty_like(x2)", em.config.reduce_block)
    em.line(f"{out} = {out}.view({src}.shape)")
    scan = {"cumsum": "tl.cumsum", "cumprod": "tl.cumprod", "cummax": "tl.associative_scan (max)"}[core.kind]
    running = {"cumsum": "total", "cumprod": "product", "cummax": "maximum"}[core.kind]
    head = (f"One program per row walks the last axis in chunks, scans each chunk with {scan} in fp32 and carries "
            f"the running {running} into the next chunk")
    return GroupCode(out, sentence(head, group, "the tail chunk is masked with the scan's neutral value"))


def add_helper(em: Emitter, source: str) -> None:
    if source not in em.helpers:
        em.helpers.append(source)


def write_cross_entropy(em: Emitter, group: Group, src: str, stem: str, final: bool) -> GroupCode:
    core: CrossEntropyRows = group.core
    k = _streamed(em, stem)
    k.ptr("target", core.target)
    k.line(f"m = tl.full([BLOCK_SIZE], {LOW}, tl.float32)")
    k.line("s = tl.zeros([BLOCK_SIZE], dtype=tl.float32)")
    _loop_head(k, group, other=NEG_INF)
    k.body += ["    m_new = tl.maximum(m, x)", "    s = s * tl.exp(m - m_new) + tl.exp(x - m_new)", "    m = m_new"]
    k.line("m_row = tl.max(m, axis=0)")
    k.line("lse = m_row + tl.log(tl.sum(s * tl.exp(m - m_row), axis=0))")
    k.line("target = tl.load(target_ptr + row)")
    k.line("x = lse - tl.load(x_ptr + row * n_cols + target).to(tl.float32)")
    k.body += chain(k, group.epilogue, "x", no_operands)
    k.line("tl.store(out_ptr + row, x)")
    out = em.new_value(False)
    _launch_streamed(em, k, src, out, f"torch.empty(n_rows, device={src}.device, dtype=torch.float32)",
                     em.config.reduce_block)
    return GroupCode(out, "One program per row streams the logits with an online max and sum of exponentials "
                          "(logsumexp in fp32) and subtracts the target's logit, writing one fp32 loss per row.")


def write_cosine(em: Emitter, group: Group, src: str, stem: str, final: bool) -> GroupCode:
    core = group.core
    k = _streamed(em, stem)
    k.ptr("y", "y2")
    k.body += [f"{name} = tl.zeros([BLOCK_SIZE], dtype=tl.float32)" for name in ("dot", "xx", "yy")]
    _loop_head(k, group)
    k.body += ["    y = tl.load(y_ptr + row * n_cols + cols, mask=mask, other=0.0).to(tl.float32)",
               "    dot += x * y", "    xx += x * x", "    yy += y * y"]
    k.line("norms = tl.sqrt(tl.sum(xx, axis=0) * tl.sum(yy, axis=0))")
    k.line("x = tl.sum(dot, axis=0) / tl.maximum(norms, 1e-8)")
    k.body += chain(k, group.epilogue, "x", no_operands)
    k.line("tl.store(out_ptr + row, x.to(out_ptr.dtype.element_ty))")
    out = em.new_value(final)
    em.line(f"y2 = {core.other}.reshape(-1, {src}.shape[-1])")
    _launch_streamed(em, k, src, out, f"torch.empty(n_rows, device={src}.device, dtype={src}.dtype)",
                     em.config.reduce_block)
    em.line(f"{out} = {out}.view({src}.shape[:-1])")
    return GroupCode(out, sentence("One program per row accumulates x.y, |x|^2 and |y|^2 in fp32 over chunks of the "
                                    "last axis and divides once", group, "rows of any length work"))
