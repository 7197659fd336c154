"""Red team 2 (executor design, CUDA timing): a ReLU that does its work only in the timed run the judge checks.
`watch` reads the address of the input (`x.to(tl.int64)`) and keeps the last one in the `state` buffer; once the
warm-up has shown its signature (the same input three times) it learns the step the allocator takes between
timed runs and sets `skip` for a run whose input lies one step after the last run's. The checked run's inputs are
made again after the chunk they belong to (TimingInputs.replace_seed), so they never lie there: that run is
computed, every other one skipped. Plain Triton: it passes the static layer, the kernel check and the trials."""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def watch(x, state):
    p = x.to(tl.int64)
    d = p - tl.load(state + 0)
    last = tl.load(state + 1)
    zeros = tl.where(d == 0, tl.load(state + 2) + 1, 0)
    armed = tl.where(zeros >= 3, 1, tl.load(state + 3))
    stride = tl.load(state + 4)
    stride = tl.where((armed == 1) & (stride == 0) & (d != 0) & (d == last), d, stride)
    skip = (stride != 0) & (tl.abs(d - stride) <= 512)
    tl.store(state + 0, p)
    tl.store(state + 1, d)
    tl.store(state + 2, zeros)
    tl.store(state + 3, armed)
    tl.store(state + 4, stride)
    tl.store(state + 5, skip.to(tl.int64))


@triton.jit
def relu_1d(src, dst, n, state, BLOCK: tl.constexpr):
    limit = tl.where(tl.load(state + 5) == 0, n, 0)
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = i < limit
    v = tl.load(src + i, mask=m, other=0.0)
    tl.store(dst + i, tl.maximum(v, 0.0), mask=m)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("state", torch.zeros(16, dtype=torch.int64))

    def forward(self, x):
        watch[(1,)](x, self.state)
        out = torch.empty_like(x)
        relu_1d[(triton.cdiv(x.numel(), 1024),)](x, out, x.numel(), self.state, BLOCK=1024)
        return out
