"""A tiled matmul (nn.Linear, torch.matmul, batched) with its bias and elementwise steps in the epilogue.

Each program owns a BLOCK_M x BLOCK_N tile of the output, walks K in BLOCK_K steps with `tl.dot`
accumulating in fp32 (3xTF32 for fp32 inputs, so the result keeps fp32 accuracy), then applies the
bias and the epilogue in registers and stores once with edge masks. Strides are passed, so transposed
operands and nn.Linear's (out, in) weight are read in place.
"""

from __future__ import annotations

from jaxrl.data.engine.ir import Linear, MatMul, Operand
from jaxrl.data.engine.teacher.emitter import Emitter, GroupCode
from jaxrl.data.engine.teacher.kernel import chain, describe
from jaxrl.data.engine.teacher.lower import Group


def _epilogue_loader(k, batched: bool):
    loaded: dict[str, str] = {}

    def load(operand: Operand) -> str:
        if operand.name in loaded:
            return loaded[operand.name]
        register = Emitter.register(operand.name)
        ptr = k.ptr(register, Emitter.operand_expr(operand))
        if operand.axes is None:  # contiguous, the output's shape: the output's offsets
            base = f"{ptr} + batch_offset" if batched else ptr
            k.line(f"{register} = tl.load({base} + c_offsets, mask=c_mask, other=0.0).to(tl.float32)")
        else:  # a vector along the output's columns
            k.line(f"{register} = tl.load({ptr} + offs_n, mask=offs_n < N, other=0.0).to(tl.float32)[None, :]")
        loaded[operand.name] = register
        return register

    return load


def write_matmul(em: Emitter, group: Group, src: str, stem: str, final: bool) -> GroupCode:
    core = group.core
    bm, bn, bk = em.config.matmul_blocks
    out = em.new_value(final)
    batched = isinstance(core, MatMul) and group.rank == 3
    k = em.kernel(stem)
    if isinstance(core, Linear):
        weight = f"self.{core.attr}.weight"
        a, b = ("x2", weight) if group.rank > 2 else (src, weight)
        if group.rank > 2:
            em.line(f"x2 = {src}.reshape(-1, {src}.shape[-1])")
        em.line(f"M, K = {a}.shape")
        em.line(f"N = {weight}.shape[0]")
        em.line(f"{out} = torch.empty((M, N), device={src}.device, dtype={src}.dtype)")
        # W is (N, K): read it as the (K, N) operand through swapped strides.
        b_strides = [f"{weight}.stride(1)", f"{weight}.stride(0)"]
        a_strides = [f"{a}.stride(0)", f"{a}.stride(1)"]
        c_strides = [f"{out}.stride(0)", f"{out}.stride(1)"]
    else:
        a, b = src, core.other
        if core.transpose_self:  # a transposed view: the kernel reads it through its strides
            em.line(f"a_t = {src}.transpose(-2, -1)")
            a = "a_t"
        if core.transpose_other:
            em.line(f"b_t = {core.other}.transpose(-2, -1)")
            b = "b_t"
        em.line(f"M, K = {a}.shape[-2], {a}.shape[-1]")
        em.line(f"N = {b}.shape[-1]")
        shape = f"({a}.shape[0], M, N)" if batched else "(M, N)"
        em.line(f"{out} = torch.empty({shape}, device={src}.device, dtype={src}.dtype)")
        a_strides = [f"{a}.stride(-2)", f"{a}.stride(-1)"]
        b_strides = [f"{b}.stride(-2)", f"{b}.stride(-1)"]
        c_strides = [f"{out}.stride(-2)", f"{out}.stride(-1)"]

    k.ptr("a", a)
    k.ptr("b", b)
    has_bias = isinstance(core, Linear) and core.bias
    if has_bias:
        k.ptr("bias", f"self.{core.attr}.bias")
    group_m = em.config.matmul_group_m
    if group_m:  # tiles in groups of GROUP_M tile rows: neighbouring programs share A rows and B columns in L2
        k.line("pid = tl.program_id(0)")
        k.line("num_pid_m = tl.cdiv(M, BLOCK_M)")
        k.line("num_pid_n = tl.cdiv(N, BLOCK_N)")
        k.line("num_pid_in_group = GROUP_M * num_pid_n")
        k.line("first_pid_m = (pid // num_pid_in_group) * GROUP_M")
        k.line("group_size_m = tl.minimum(num_pid_m - first_pid_m, GROUP_M)")
        k.line("pid_m = first_pid_m + (pid % num_pid_in_group) % group_size_m")
        k.line("pid_n = (pid % num_pid_in_group) // group_size_m")
    else:
        k.line("pid_m = tl.program_id(0)")
        k.line("pid_n = tl.program_id(1)")
    if batched:
        k.line(f"pid_b = tl.program_id({1 if group_m else 2})")
        k.line("a_ptr += pid_b * stride_ab")
        k.line("b_ptr += pid_b * stride_bb")
        k.line("batch_offset = pid_b * stride_cb")
    k.line("offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)")
    k.line("offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)")
    k.line("offs_k = tl.arange(0, BLOCK_K)")
    k.line("a_ptrs = a_ptr + offs_m[:, None] * stride_am + offs_k[None, :] * stride_ak")
    k.line("b_ptrs = b_ptr + offs_k[:, None] * stride_bk + offs_n[None, :] * stride_bn")
    k.line("acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)")
    k.line("for k in range(0, K, BLOCK_K):")
    k.line("    a = tl.load(a_ptrs, mask=(offs_m[:, None] < M) & (offs_k[None, :] < K - k), other=0.0)")
    k.line("    b = tl.load(b_ptrs, mask=(offs_k[:, None] < K - k) & (offs_n[None, :] < N), other=0.0)")
    precision = ', input_precision="tf32x3"' if em.program.dtype == "float32" else ""
    k.line(f"    acc += tl.dot(a, b{precision})")
    k.line("    a_ptrs += BLOCK_K * stride_ak")
    k.line("    b_ptrs += BLOCK_K * stride_bk")
    k.line("c_offsets = offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn")
    k.line("c_mask = (offs_m[:, None] < M) & (offs_n[None, :] < N)")
    if has_bias:
        k.line("bias = tl.load(bias_ptr + offs_n, mask=offs_n < N, other=0.0).to(tl.float32)")
        k.line("acc += bias[None, :]")
    k.body += chain(k, group.epilogue, "acc", _epilogue_loader(k, batched))
    c = "c_ptr + batch_offset" if batched else "c_ptr"
    k.line(f"tl.store({c} + c_offsets, acc.to(c_ptr.dtype.element_ty), mask=c_mask)")
    k.ptr("c", out)
    for name in ("M", "N", "K"):
        k.value(name, name)
    for name, arg in zip(("stride_am", "stride_ak", "stride_bk", "stride_bn", "stride_cm", "stride_cn"),
                         a_strides + b_strides + c_strides):
        k.value(name, arg)
    if batched:
        k.value("stride_ab", f"{a}.stride(0)")
        k.value("stride_bb", f"{b}.stride(0)")
        k.value("stride_cb", f"{out}.stride(0)")
    k.constexpr("BLOCK_M", str(bm))
    k.constexpr("BLOCK_N", str(bn))
    k.constexpr("BLOCK_K", str(bk))
    if group_m:
        k.constexpr("GROUP_M", str(group_m))
        grid = f"(triton.cdiv(M, {bm}) * triton.cdiv(N, {bn})" + (f", {a}.shape[0])" if batched else ",)")
    else:
        grid = f"(triton.cdiv(M, {bm}), triton.cdiv(N, {bn})" + (f", {a}.shape[0])" if batched else ")")
    em.line(k.launch(grid, num_warps=str(em.config.matmul_warps), num_stages=str(em.config.matmul_stages)))
    if isinstance(core, Linear) and group.rank > 2:
        em.line(f"{out} = {out}.reshape({src}.shape[:-1] + (N,))")

    what = "nn.Linear's x @ W^T" if isinstance(core, Linear) else ("the batched matmul" if batched else "the matmul")
    fused = (["the bias"] if has_bias else []) + describe(group.epilogue)
    precision_note = ("fp32 inputs go through tl.dot as 3xTF32 for fp32 accuracy" if em.program.dtype == "float32"
                      else f"{em.program.dtype} tiles feed tl.dot directly")
    order = (f"a 1-D grid visiting the tiles in groups of {group_m} tile rows so that neighbouring programs reuse the "
             "same A rows and B columns from L2" if group_m else "a 2-D grid, one program per (row, column) tile")
    plan = (f"Tile {what} into {bm}x{bn} output blocks per program{' (one grid axis per batch)' if batched else ''} on "
            f"{order}, {em.config.matmul_warps} warps, loop over K in steps of {bk} with an fp32 accumulator "
            f"({precision_note})")
    if fused:
        plan += f", and apply {' -> '.join(fused)} in the epilogue before one masked store"
    return GroupCode(out, plan + ".")
