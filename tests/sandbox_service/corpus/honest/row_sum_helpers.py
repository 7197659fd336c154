import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _block_sum(ptr, offs, n_cols):
    """A Triton helper called from a kernel: it is a kernel too."""
    vals = tl.load(ptr + offs, mask=offs < n_cols, other=0.0)
    return tl.sum(vals, axis=0)


@triton.jit
def row_sum_kernel(x_ptr, out_ptr, row_stride, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    acc = 0.0
    for start in range(0, n_cols, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        acc += _block_sum(x_ptr + row * row_stride, offs, n_cols)
    tl.store(out_ptr + row, acc)


def _launch_row_sum(x: torch.Tensor) -> torch.Tensor:
    n_rows, n_cols = x.shape
    out = x.new_empty(n_rows)
    row_sum_kernel[(n_rows,)](x, out, x.stride(0), n_cols, BLOCK=64)
    return out


class _RowSum(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return _launch_row_sum(x.contiguous())

    @staticmethod
    def backward(ctx, grad):
        raise NotImplementedError("forward only")


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def _reduce(self, x):
        return _RowSum.apply(x)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self._reduce(x)
