"""KernelBench L1/40 (LayerNorm over the last three dims, 16 rows of 4M elements, affine weight and bias).

Rows are far too long for one program, so: (1) per-chunk count/mean/M2, (2) each normalising program
merges its row's chunk statistics (Chan's parallel variance: no E[x^2] - E[x]^2 cancellation) and
writes its chunk. x is read twice and written once."""
import math

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def chunk_stats_kernel(x_ptr, mean_ptr, m2_ptr, row_len, chunks_per_row, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    chunk = tl.program_id(1)
    start = chunk * BLOCK
    offs = start + tl.arange(0, BLOCK)
    mask = offs < row_len
    x = tl.load(x_ptr + row.to(tl.int64) * row_len + offs, mask=mask, other=0.0)
    count = tl.minimum(row_len - start, BLOCK).to(tl.float32)
    mean = tl.sum(x, axis=0) / count
    d = tl.where(mask, x - mean, 0.0)
    tl.store(mean_ptr + row * chunks_per_row + chunk, mean)
    tl.store(m2_ptr + row * chunks_per_row + chunk, tl.sum(d * d, axis=0))


@triton.jit
def normalize_kernel(
    x_ptr, w_ptr, b_ptr, out_ptr, mean_ptr, m2_ptr, row_len, chunks_per_row, eps,
    BLOCK: tl.constexpr, CHUNKS_POW2: tl.constexpr,
):
    row = tl.program_id(0)
    chunk = tl.program_id(1)
    # merge the row's chunk statistics: chunk c holds min(BLOCK, row_len - c * BLOCK) elements
    cs = tl.arange(0, CHUNKS_POW2)
    c_in = cs < chunks_per_row
    counts = tl.where(c_in, tl.minimum(row_len - cs * BLOCK, BLOCK), 0).to(tl.float32)
    means = tl.load(mean_ptr + row * chunks_per_row + cs, mask=c_in, other=0.0)
    m2s = tl.load(m2_ptr + row * chunks_per_row + cs, mask=c_in, other=0.0)
    mean = tl.sum(counts * means, axis=0) / row_len
    delta = means - mean
    var = (tl.sum(m2s, axis=0) + tl.sum(counts * delta * delta, axis=0)) / row_len
    rstd = 1.0 / tl.sqrt(var + eps)

    offs = chunk * BLOCK + tl.arange(0, BLOCK)
    mask = offs < row_len
    base = row.to(tl.int64) * row_len
    x = tl.load(x_ptr + base + offs, mask=mask, other=0.0)
    w = tl.load(w_ptr + offs, mask=mask, other=0.0)
    b = tl.load(b_ptr + offs, mask=mask, other=0.0)
    tl.store(out_ptr + base + offs, (x - mean) * rstd * w + b, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, normalized_shape: tuple):
        super().__init__()
        shape = tuple(normalized_shape) if isinstance(normalized_shape, (tuple, list)) else (normalized_shape,)
        self.normalized_shape = shape
        self.eps = 1e-5  # nn.LayerNorm's default
        self.weight = nn.Parameter(torch.ones(shape))
        self.bias = nn.Parameter(torch.zeros(shape))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        row_len = math.prod(self.normalized_shape)
        rows = x.numel() // row_len
        block = 4096
        chunks = triton.cdiv(row_len, block)
        means = torch.empty((rows, chunks), device=x.device, dtype=torch.float32)
        m2s = torch.empty((rows, chunks), device=x.device, dtype=torch.float32)
        chunk_stats_kernel[(rows, chunks)](x, means, m2s, row_len, chunks, BLOCK=block, num_warps=8)
        out = torch.empty_like(x)
        normalize_kernel[(rows, chunks)](
            x, self.weight.contiguous(), self.bias.contiguous(), out, means, m2s, row_len, chunks, self.eps,
            BLOCK=block, CHUNKS_POW2=triton.next_power_of_2(chunks), num_warps=8,
        )
        return out
