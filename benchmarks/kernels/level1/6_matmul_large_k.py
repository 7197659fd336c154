"""KernelBench L1/6 (matmul with a large K, 256x524288 @ 524288x256): split-K partial products, then a sum.

Only a handful of output tiles exist, so each tile's K range is cut into chunks computed by separate
programs (fp32 partials), and a second kernel adds the partials in a fixed order (deterministic)."""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def partial_matmul_kernel(
    a_ptr, b_ptr, part_ptr, M, N, K, k_chunk,
    stride_am, stride_ak, stride_bk, stride_bn,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
):
    tile_m = tl.program_id(0)
    tile_n = tl.program_id(1)
    split = tl.program_id(2)
    rows = tile_m * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tile_n * BLOCK_N + tl.arange(0, BLOCK_N)
    ks = tl.arange(0, BLOCK_K)
    k_start = split * k_chunk
    k_end = tl.minimum(k_start + k_chunk, K)
    a_ptrs = a_ptr + rows[:, None] * stride_am + (k_start + ks)[None, :] * stride_ak
    b_ptrs = b_ptr + (k_start + ks)[:, None] * stride_bk + cols[None, :] * stride_bn
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(k_start, k_end, BLOCK_K):
        k_in = (k0 + ks) < k_end
        a = tl.load(a_ptrs, mask=(rows[:, None] < M) & k_in[None, :], other=0.0)
        b = tl.load(b_ptrs, mask=k_in[:, None] & (cols[None, :] < N), other=0.0)
        acc = tl.dot(a, b, acc, input_precision="tf32x3")
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk
    # partials are laid out [split, M, N], contiguous
    out = part_ptr + split * M * N + rows[:, None] * N + cols[None, :]
    tl.store(out, acc, mask=(rows[:, None] < M) & (cols[None, :] < N))


@triton.jit
def sum_splits_kernel(part_ptr, c_ptr, MN, splits, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < MN
    total = tl.zeros((BLOCK,), dtype=tl.float32)
    for s in range(0, splits):
        total += tl.load(part_ptr + s * MN + offs, mask=mask, other=0.0)
    tl.store(c_ptr + offs, total, mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        m, k = A.shape
        n = B.shape[1]
        block_m, block_n, block_k = 128, 128, 32
        tiles = triton.cdiv(m, block_m) * triton.cdiv(n, block_n)
        # Aim for a few hundred programs in all, each with at least 8 K-steps of work.
        splits = max(1, min(triton.cdiv(512, tiles), triton.cdiv(k, 8 * block_k)))
        k_chunk = triton.cdiv(triton.cdiv(k, splits), block_k) * block_k
        splits = triton.cdiv(k, k_chunk)
        partials = torch.empty((splits, m, n), device=A.device, dtype=torch.float32)
        grid = (triton.cdiv(m, block_m), triton.cdiv(n, block_n), splits)
        partial_matmul_kernel[grid](
            A, B, partials, m, n, k, k_chunk,
            A.stride(0), A.stride(1), B.stride(0), B.stride(1),
            BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_K=block_k, num_warps=8, num_stages=3,
        )
        C = torch.empty((m, n), device=A.device, dtype=torch.float32)
        block = 1024
        sum_splits_kernel[(triton.cdiv(m * n, block),)](partials, C, m * n, splits, BLOCK=block)
        return C
