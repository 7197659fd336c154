"""Example candidate: a correct Triton kernel for scaled_add_reference.py."""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def scaled_add_kernel(a_ptr, b_ptr, bias_ptr, out_ptr, alpha, n_cols, n_elements, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offsets = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n_elements
    a = tl.load(a_ptr + offsets, mask=mask)
    b = tl.load(b_ptr + offsets, mask=mask)
    bias = tl.load(bias_ptr + offsets % n_cols, mask=mask)
    tl.store(out_ptr + offsets, alpha * a + b + bias, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, alpha: float):
        super().__init__()
        self.alpha = alpha
        self.bias = nn.Parameter(torch.randn(4096))

    def forward(self, a, b):
        a, b = a.contiguous(), b.contiguous()
        out = torch.empty_like(a)
        n = a.numel()
        grid = (triton.cdiv(n, 1024),)
        scaled_add_kernel[grid](a, b, self.bias, out, self.alpha, a.shape[-1], n, BLOCK=1024)
        return out
