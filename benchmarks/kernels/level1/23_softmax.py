"""KernelBench L1/23 (softmax over dim 1 of a (4096, 393216) tensor): one program per row, two sweeps.

Sweep 1 keeps a running max and a running sum of exp(x - max) per lane (online softmax); sweep 2
writes exp(x - max) / sum. Rows of any length: the row is never held in registers at once."""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def softmax_rows_kernel(x_ptr, out_ptr, cols, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * cols
    out_row = out_ptr + row * cols
    lanes = tl.arange(0, BLOCK)
    m = tl.full((BLOCK,), float("-inf"), dtype=tl.float32)
    s = tl.zeros((BLOCK,), dtype=tl.float32)
    for start in range(0, cols, BLOCK):
        x = tl.load(x_row + start + lanes, mask=start + lanes < cols, other=float("-inf"))
        m_new = tl.maximum(m, x)
        scale = tl.where(m_new == float("-inf"), 0.0, tl.exp(m - m_new))
        s = s * scale + tl.where(x == float("-inf"), 0.0, tl.exp(x - m_new))
        m = m_new
    row_max = tl.max(m, axis=0)
    total = tl.sum(s * tl.where(m == float("-inf"), 0.0, tl.exp(m - row_max)), axis=0)
    inv = 1.0 / total
    for start in range(0, cols, BLOCK):
        mask = start + lanes < cols
        x = tl.load(x_row + start + lanes, mask=mask, other=float("-inf"))
        tl.store(out_row + start + lanes, tl.exp(x - row_max) * inv, mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        rows, cols = x.shape
        out = torch.empty_like(x)
        block = min(4096, triton.next_power_of_2(cols))
        softmax_rows_kernel[(rows,)](x, out, cols, BLOCK=block, num_warps=8)
        return out
