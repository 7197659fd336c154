"""A WRONG kernel for problems/relu.py: it copies its input (identity) instead of applying ReLU."""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def relu_1d(src, dst, n, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    v = tl.load(src + i, mask=i < n, other=0.0)
    tl.store(dst + i, v, mask=i < n)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        flat = x.flatten()
        n = flat.shape[0]
        out = torch.empty(n, dtype=x.dtype, device=x.device)
        BLOCK = 128
        relu_1d[((n + BLOCK - 1) // BLOCK,)](flat, out, n, BLOCK=BLOCK)
        return out.reshape(x.shape)
