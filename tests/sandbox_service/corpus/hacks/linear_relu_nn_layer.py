import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def relu_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    v = tl.load(x_ptr + i, mask=i < n)
    tl.store(y_ptr + i, tl.maximum(v, 0.0), mask=i < n)


class ModelNew(nn.Module):
    """Partial delegation: nn.Linear computes the matmul, Triton only the ReLU."""

    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x):
        h = self.linear(x).contiguous()
        y = torch.empty_like(h)
        relu_kernel[(triton.cdiv(h.numel(), 256),)](h, y, h.numel(), BLOCK=256)
        return y
