"""KernelBench L1/47 (sum over one dimension, keepdim): the tensor seen as [outer, reduced, inner].

Each program owns BLOCK_I consecutive inner positions of one outer index and walks the reduced
dimension in [BLOCK_R, BLOCK_I] tiles, so loads stay contiguous along the inner dimension."""
import math

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def sum_middle_kernel(x_ptr, out_ptr, reduced, inner, BLOCK_R: tl.constexpr, BLOCK_I: tl.constexpr):
    outer = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * BLOCK_I + tl.arange(0, BLOCK_I)
    rs = tl.arange(0, BLOCK_R)
    col_in = cols < inner
    base = x_ptr + outer * reduced * inner
    acc = tl.zeros((BLOCK_R, BLOCK_I), dtype=tl.float32)
    for r0 in range(0, reduced, BLOCK_R):
        r = r0 + rs
        mask = (r < reduced)[:, None] & col_in[None, :]
        acc += tl.load(base + r[:, None].to(tl.int64) * inner + cols[None, :], mask=mask, other=0.0)
    tl.store(out_ptr + outer * inner + cols, tl.sum(acc, axis=0), mask=col_in)


class ModelNew(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        dim = self.dim % x.dim()
        outer = math.prod(x.shape[:dim])
        reduced = x.shape[dim]
        inner = math.prod(x.shape[dim + 1:])
        out_shape = x.shape[:dim] + (1,) + x.shape[dim + 1:]
        out = torch.empty(out_shape, device=x.device, dtype=x.dtype)
        block_r, block_i = 16, 256
        grid = (outer, triton.cdiv(inner, block_i))
        sum_middle_kernel[grid](x, out, reduced, inner, BLOCK_R=block_r, BLOCK_I=block_i, num_warps=8)
        return out
