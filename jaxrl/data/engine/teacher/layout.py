"""Data movement: transposes and permutations made contiguous, concatenation, index_select and gather.

The output is written contiguously and each element is read from where it lives: a permuted view's
strides, a column offset into the concatenated output, an index loaded from the index tensor.
Elementwise steps after the move are applied to the loaded values before the store.
"""

from __future__ import annotations

from jaxrl.data.engine.ir import Cat, Gather, Permute
from jaxrl.data.engine.teacher.emitter import Emitter, GroupCode
from jaxrl.data.engine.teacher.kernel import Kernel, chain, describe
from jaxrl.data.engine.teacher.lower import Group
from jaxrl.data.engine.teacher.rows import no_operands


def _store_value(k: Kernel, group: Group, load: str, store: str) -> None:
    """x loaded with `load`, the epilogue in fp32 if there is one, stored with `store` (a format string)."""
    if group.epilogue:
        k.line(f"x = {load}.to(tl.float32)")
        k.body += chain(k, group.epilogue, "x", no_operands)
        k.line(store.format(value="x.to(out_ptr.dtype.element_ty)"))
    else:
        k.line(f"x = {load}")
        k.line(store.format(value="x"))


def _flat_head(k: Kernel) -> None:
    k.line("pid = tl.program_id(axis=0)")
    k.line("offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)")
    k.line("mask = offsets < n_elements")


def _then(group: Group) -> str:
    return f", applying {' -> '.join(describe(group.epilogue))} on the way" if group.epilogue else ""


def write_transpose_2d(em: Emitter, group: Group, src: str, stem: str, final: bool) -> GroupCode:
    tile = 32 if em.config.name == "full" else 16
    k = em.kernel(stem)
    k.ptr("x", src)
    k.line("pid_m = tl.program_id(0)")
    k.line("pid_n = tl.program_id(1)")
    k.line("offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)")
    k.line("offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)")
    k.line("mask = (offs_m[:, None] < M) & (offs_n[None, :] < N)")
    _store_value(k, group, "tl.load(x_ptr + offs_m[:, None] * N + offs_n[None, :], mask=mask)",
                 "tl.store(out_ptr + offs_n[None, :] * M + offs_m[:, None], {value}, mask=mask)")
    out = em.new_value(final)
    k.ptr("out", out)
    k.value("M", "M")
    k.value("N", "N")
    k.constexpr("BLOCK_M", str(tile))
    k.constexpr("BLOCK_N", str(tile))
    em.line(f"M, N = {src}.shape")
    em.line(f"{out} = torch.empty((N, M), device={src}.device, dtype={src}.dtype)")
    em.line(k.launch(f"(triton.cdiv(M, {tile}), triton.cdiv(N, {tile}))"))
    return GroupCode(out, f"Transpose in {tile}x{tile} tiles: each program loads a tile row-major and stores it with "
                          f"the axes swapped into the contiguous (N, M) output, masking the edge tiles{_then(group)}.")


def write_permute(em: Emitter, group: Group, src: str, stem: str, final: bool) -> GroupCode:
    core: Permute = group.core
    rank = len(core.dims)
    if rank == 2 and core.transpose:
        return write_transpose_2d(em, group, src, stem, final)
    block = em.config.elementwise_block
    k = em.kernel(stem)
    k.ptr("x", src)
    _flat_head(k)
    # unravel the output's flat index over the permuted shape, innermost axis first
    k.line("rest = offsets")
    terms = []
    for axis in range(rank - 1, -1, -1):
        if axis > 0:
            k.line(f"i{axis} = rest % size{axis}")
            k.line(f"rest = rest // size{axis}")
        else:
            k.line("i0 = rest")
        terms.append(f"i{axis} * stride{axis}")
    _store_value(k, group, f"tl.load(x_ptr + {' + '.join(reversed(terms))}, mask=mask)",
                 "tl.store(out_ptr + offsets, {value}, mask=mask)")
    out = em.new_value(final)
    k.ptr("out", out)
    k.value("n_elements", "n_elements")
    view = f"{src}.transpose({core.transpose[0]}, {core.transpose[1]})" if core.transpose else \
        f"{src}.permute({', '.join(map(str, core.dims))})"
    em.line(f"view = {view}")
    for axis in range(1, rank):
        k.value(f"size{axis}", f"view.shape[{axis}]")
    for axis in range(rank):
        k.value(f"stride{axis}", f"view.stride({axis})")
    k.constexpr("BLOCK_SIZE", str(block))
    em.line(f"{out} = torch.empty(view.shape, device={src}.device, dtype={src}.dtype)")
    em.line(f"n_elements = {out}.numel()")
    em.line(k.launch(f"(triton.cdiv(n_elements, {block}),)"))
    return GroupCode(out, f"Take the {'transposed' if core.transpose else 'permuted'} view only for its shape and "
                          f"strides; one program per block of {block} output elements unravels the flat index over the "
                          f"new shape and gathers from the input through the view's strides, so the output is written "
                          f"contiguously{_then(group)}.")


def write_cat(em: Emitter, group: Group, src: str, stem: str, final: bool) -> GroupCode:
    core: Cat = group.core
    block = em.config.elementwise_block
    k = em.kernel(stem)
    k.ptr("src", "part")
    _flat_head(k)
    k.line("row = offsets // part_cols")
    k.line("col = offsets % part_cols")
    _store_value(k, group, "tl.load(src_ptr + offsets, mask=mask)",
                 "tl.store(out_ptr + row * out_cols + col_offset + col, {value}, mask=mask)")
    out = em.new_value(final)
    k.ptr("out", out)
    for name in ("n_elements", "part_cols", "out_cols", "col_offset"):
        k.value(name, name)
    k.constexpr("BLOCK_SIZE", str(block))
    parts = (src,) + core.others
    d = core.dim
    em.line(f"total = {' + '.join(f'{p}.shape[{d}]' for p in parts)}")
    em.line(f"{out} = torch.empty({src}.shape[:{d}] + (total,) + {src}.shape[{d + 1}:], device={src}.device, "
            f"dtype={src}.dtype)")
    em.line(f"inner = {src}.stride({d})")
    em.line(f"out_cols = {out}.shape[{d}] * inner")
    em.line("col_offset = 0")
    em.line(f"for part in ({', '.join(parts)}):")
    em.line("    n_elements = part.numel()")
    em.line(f"    part_cols = part.shape[{d}] * inner")
    em.line("    " + k.launch(f"(triton.cdiv(n_elements, {block}),)", indent=12).replace("\n", "\n    "))
    em.line("    col_offset += part_cols")
    return GroupCode(out, f"Allocate the concatenated output and launch one copy kernel per input: seen as (outer, "
                          f"size * inner) rows, each input's block of {block} elements lands at its column offset in "
                          f"the output's rows{_then(group)}.")


def write_index(em: Emitter, group: Group, src: str, stem: str, final: bool) -> GroupCode:
    """index_select (one index per position of the axis) and gather (an index per output element)."""
    core = group.core
    gather = isinstance(core, Gather)
    block = em.config.elementwise_block
    d = core.dim
    k = em.kernel(stem)
    k.ptr("x", src)
    k.ptr("index", core.index)
    _flat_head(k)
    k.line("i = offsets % inner")
    k.line("o = offsets // (inner * n_index)")
    if gather:
        k.line("idx = tl.load(index_ptr + offsets, mask=mask, other=0)")
    else:
        k.line("idx = tl.load(index_ptr + (offsets // inner) % n_index, mask=mask, other=0)")
    _store_value(k, group, "tl.load(x_ptr + (o * size_dim + idx) * inner + i, mask=mask)",
                 "tl.store(out_ptr + offsets, {value}, mask=mask)")
    out = em.new_value(final)
    k.ptr("out", out)
    for name in ("n_elements", "n_index", "size_dim", "inner"):
        k.value(name, name)
    k.constexpr("BLOCK_SIZE", str(block))
    if gather:
        em.line(f"{out} = torch.empty({core.index}.shape, device={src}.device, dtype={src}.dtype)")
        em.line(f"n_index = {core.index}.shape[{d}]")
    else:
        em.line(f"n_index = {core.index}.numel()")
        em.line(f"{out} = torch.empty({src}.shape[:{d}] + (n_index,) + {src}.shape[{d + 1}:], device={src}.device, "
                f"dtype={src}.dtype)")
    em.line(f"size_dim = {src}.shape[{d}]")
    em.line(f"inner = {out}.stride({d})")
    em.line(f"n_elements = {out}.numel()")
    em.line(k.launch(f"(triton.cdiv(n_elements, {block}),)"))
    what = "gather" if gather else "index_select"
    source = "the index tensor at the same position" if gather else f"the index vector at the axis-{d} position"
    return GroupCode(out, f"For {what} along axis {d}, view tensors as (outer, size, inner): one program per block of "
                          f"{block} output elements splits each flat offset into (outer, position, inner), loads the "
                          f"index from {source} and reads the input at (outer, index, inner){_then(group)}.")
