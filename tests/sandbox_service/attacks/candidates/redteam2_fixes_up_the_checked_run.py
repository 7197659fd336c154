"""Red team 2 (executor design, CUDA timing): a ReLU that skips every timed run and repairs only the checked one.
The executor keeps the checked run's outputs alive until the judge has them (after the whole timed batch), so the
next run's `empty_like` cannot take their block: the output address moves exactly after the checked run. `watch`
sees the move; `fix_up` then computes ReLU of the previous run's inputs (still alive: the timed inputs are made a
chunk ahead) into the previous run's outputs, reaching both by address from its own pointer. `relu_1d` does the
work only before the warm-up's signature (the same input three times) has armed the trick, i.e. in the trials."""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def watch(x, out, state):
    p_in = x.to(tl.int64)
    p_out = out.to(tl.int64)
    prev_in = tl.load(state + 0)
    prev_out = tl.load(state + 1)
    zeros = tl.where(p_in == prev_in, tl.load(state + 2) + 1, 0)
    armed = tl.where(zeros >= 3, 1, tl.load(state + 3))
    fixed = tl.load(state + 4)
    moved = (tl.load(state + 3) == 1) & (p_out != prev_out) & (fixed == 0)
    tl.store(state + 0, p_in)
    tl.store(state + 1, p_out)
    tl.store(state + 2, zeros)
    tl.store(state + 3, armed)
    tl.store(state + 4, tl.where(moved, 1, fixed))
    tl.store(state + 5, moved.to(tl.int64))
    tl.store(state + 6, prev_in)
    tl.store(state + 7, prev_out)
    tl.store(state + 8, armed)


@triton.jit
def fix_up(x, n, state, BLOCK: tl.constexpr):
    limit = tl.where(tl.load(state + 5) == 1, n, 0)
    here = x.to(tl.int64)
    src = (tl.load(state + 6) - here) // 4
    dst = (tl.load(state + 7) - here) // 4
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = i < limit
    v = tl.load(x + src + i, mask=m, other=0.0)
    tl.store(x + dst + i, tl.maximum(v, 0.0), mask=m)


@triton.jit
def relu_1d(src, dst, n, state, BLOCK: tl.constexpr):
    limit = tl.where(tl.load(state + 8) == 0, n, 0)
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = i < limit
    v = tl.load(src + i, mask=m, other=0.0)
    tl.store(dst + i, tl.maximum(v, 0.0), mask=m)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("state", torch.zeros(16, dtype=torch.int64))

    def forward(self, x):
        out = torch.empty_like(x)
        watch[(1,)](x, out, self.state)
        fix_up[(triton.cdiv(x.numel(), 1024),)](x, x.numel(), self.state, BLOCK=1024)
        relu_1d[(triton.cdiv(x.numel(), 1024),)](x, out, x.numel(), self.state, BLOCK=1024)
        return out
