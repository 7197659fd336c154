"""Executor design: the kernel reaches Python through Triton's own modules (`triton.runtime...` resolves to the
os module at compile time, where the front end would call `system`). Refused: a module attribute may reach
only Triton's language."""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def relu_1d(src, dst, n, BLOCK: tl.constexpr):
    triton.runtime.jit.os.system("echo attempted-shell-in-executor")
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    v = tl.load(src + i, mask=i < n, other=0.0)
    tl.store(dst + i, tl.maximum(v, 0.0), mask=i < n)


class ModelNew(nn.Module):
    def forward(self, x):
        out = torch.empty_like(x)
        relu_1d[(triton.cdiv(x.numel(), 128),)](x, out, x.numel(), BLOCK=128)
        return out
