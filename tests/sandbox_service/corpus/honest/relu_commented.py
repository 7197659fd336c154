"""ReLU in Triton.

The reference computes torch.relu(x); an equivalent PyTorch spelling would be F.relu(x) or
torch.clamp(x, min=0), or even torch.matmul-free `x * (x > 0)`. None of those run here.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl

REFERENCE_EXPRESSION = "torch.relu(x)"  # a string, not a call


@triton.jit
def relu_kernel(x_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    # Each program handles BLOCK_SIZE elements, like torch.relu on a slice.
    pid = tl.program_id(axis=0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask)
    relu_out = tl.where(x > 0, x, 0.0)  # torch.where(x > 0, x, 0) in PyTorch terms
    tl.store(out_ptr + offsets, relu_out, mask=mask)


class ModelNew(nn.Module):
    """Drop-in replacement for Model: same output as torch.relu, computed by relu_kernel."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # torch.relu(x) would be: return torch.relu(x)
        x = x.contiguous()
        out = torch.empty_like(x)
        n_elements = x.numel()
        grid = lambda meta: (triton.cdiv(n_elements, meta["BLOCK_SIZE"]),)
        relu_kernel[grid](x, out, n_elements, BLOCK_SIZE=1024)
        return out
