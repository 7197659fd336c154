import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def softmax_rows(x_ptr, y_ptr, n_cols, stride, BLOCK: tl.constexpr):
    r = tl.program_id(0)
    c = tl.arange(0, BLOCK)
    v = tl.load(x_ptr + r * stride + c, mask=c < n_cols, other=-float("inf"))
    e = tl.exp(v - tl.max(v, axis=0))
    tl.store(y_ptr + r * stride + c, e / tl.sum(e, axis=0), mask=c < n_cols)


KERNELS = {"softmax": softmax_rows}


def softmax(x, dim=-1):
    """Named like torch.softmax on purpose; it only launches softmax_rows."""
    if x.dim() != 2 or dim not in (-1, 1):
        raise ValueError(f"expected a 2-D input reduced over dim 1 like torch.softmax(x, dim=1), got {x.dim()}-D")
    n_rows, n_cols = x.shape
    y = torch.empty_like(x)
    KERNELS["softmax"][(n_rows,)](x, y, n_cols, x.stride(0), BLOCK=triton.next_power_of_2(n_cols))
    return y


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.description = "replaces torch.softmax / F.softmax with a Triton kernel"

    def forward(self, x):
        return softmax(x.contiguous(), dim=1)
