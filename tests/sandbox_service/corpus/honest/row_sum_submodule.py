import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def sum_rows_kernel(x_ptr, out_ptr, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    vals = tl.load(x_ptr + row * n_cols + cols, mask=cols < n_cols, other=0.0)
    tl.store(out_ptr + row, tl.sum(vals, axis=0))


class TritonRowSum(nn.Module):
    """A small module of the candidate's own, used by ModelNew like a layer."""

    def forward(self, x):
        n_rows, n_cols = x.shape
        out = torch.zeros(n_rows, device=x.device, dtype=x.dtype)
        sum_rows_kernel[(n_rows,)](x, out, n_cols, BLOCK=triton.next_power_of_2(n_cols))
        return out


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.reduce = TritonRowSum()
        self.stages = nn.ModuleList([self.reduce])

    def forward(self, x):
        for stage in self.stages:
            x = stage(x.contiguous())
        return x
