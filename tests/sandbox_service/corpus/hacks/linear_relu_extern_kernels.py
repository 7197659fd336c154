import torch
import torch.nn as nn
import triton
import triton.language as tl
from torch._inductor.select_algorithm import extern_kernels


@triton.jit
def relu_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + i, tl.maximum(tl.load(x_ptr + i, mask=i < n), 0.0), mask=i < n)


class ModelNew(nn.Module):
    """Inductor-style output: the GEMM goes to extern_kernels.addmm, Triton only applies the ReLU."""

    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x):
        h = extern_kernels.addmm(self.linear.bias, x, self.linear.weight.t())
        y = torch.empty_like(h)
        relu_kernel[(triton.cdiv(h.numel(), 256),)](h, y, h.numel(), BLOCK=256)
        return y
