"""Executor design: an honest-looking forward that branches on a value read back to the host. The candidate's
process has no values, so the launch interface cannot express it: a clear `runtime_error` that says so."""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def relu_1d(src, dst, n, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    v = tl.load(src + i, mask=i < n, other=0.0)
    tl.store(dst + i, tl.maximum(v, 0.0), mask=i < n)


class ModelNew(nn.Module):
    def forward(self, x):
        out = torch.empty_like(x)
        if x.max().item() > 0:
            relu_1d[(triton.cdiv(x.numel(), 128),)](x, out, x.numel(), BLOCK=128)
        return out
