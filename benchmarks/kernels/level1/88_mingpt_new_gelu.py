"""KernelBench L1/88 (minGPT's tanh-approximated GELU): one elementwise pass, tanh built from exp."""
import math

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def gelu_tanh_kernel(x_ptr, out_ptr, n, SQRT_2_OVER_PI: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    u = SQRT_2_OVER_PI * (x + 0.044715 * x * x * x)
    # tanh(u) = 1 - 2 / (exp(2u) + 1): saturates correctly to +-1 when exp overflows or underflows
    t = 1.0 - 2.0 / (tl.exp(2.0 * u) + 1.0)
    tl.store(out_ptr + offs, 0.5 * x * (1.0 + t), mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        out = torch.empty_like(x)
        n = x.numel()
        block = 2048
        gelu_tanh_kernel[(triton.cdiv(n, block),)](x, out, n, SQRT_2_OVER_PI=math.sqrt(2.0 / math.pi), BLOCK=block)
        return out
