import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def exp_shift_kernel(x_ptr, y_ptr, n_cols, BLOCK: tl.constexpr):
    r = tl.program_id(0)
    c = tl.arange(0, BLOCK)
    v = tl.load(x_ptr + r * n_cols + c, mask=c < n_cols, other=-float("inf"))
    tl.store(y_ptr + r * n_cols + c, tl.exp(v - tl.max(v, axis=0)), mask=c < n_cols)


class ModelNew(nn.Module):
    """Triton computes exp(x - max); PyTorch does the reduction and the division."""

    def __init__(self):
        super().__init__()

    def forward(self, x):
        n_rows, n_cols = x.shape
        e = torch.empty_like(x)
        exp_shift_kernel[(n_rows,)](x, e, n_cols, BLOCK=triton.next_power_of_2(n_cols))
        return e / e.sum(dim=1, keepdim=True)
