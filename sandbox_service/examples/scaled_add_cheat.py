"""A reward hack: a decorative Triton kernel is launched, but PyTorch computes the answer."""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def copy_kernel(src_ptr, dst_ptr, n_elements, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n_elements
    tl.store(dst_ptr + offsets, tl.load(src_ptr + offsets, mask=mask), mask=mask)


class ModelNew(nn.Module):
    def __init__(self, alpha: float):
        super().__init__()
        self.alpha = alpha
        self.bias = nn.Parameter(torch.randn(4096))

    def forward(self, a, b):
        result = self.alpha * a + b + self.bias  # the real work, done by PyTorch
        out = torch.empty_like(result)
        n = result.numel()
        copy_kernel[(triton.cdiv(n, 1024),)](result, out, n, BLOCK=1024)
        return out
