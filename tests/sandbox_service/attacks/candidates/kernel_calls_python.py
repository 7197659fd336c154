"""Executor design: the kernel names a plain Python function. Triton's front end would call it at compile time
(and the interpreter runs kernel bodies as Python): with the trusted executor compiling, that would be the
candidate's code in a trusted process. The kernel check refuses the name before anything compiles it."""
import torch
import torch.nn as nn
import triton
import triton.language as tl


def leak(n):
    print("attempted-python-in-executor")
    return n


@triton.jit
def relu_1d(src, dst, n, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, leak(BLOCK))
    v = tl.load(src + i, mask=i < n, other=0.0)
    tl.store(dst + i, tl.maximum(v, 0.0), mask=i < n)


class ModelNew(nn.Module):
    def forward(self, x):
        out = torch.empty_like(x)
        relu_1d[(triton.cdiv(x.numel(), 128),)](x, out, x.numel(), BLOCK=128)
        return out
