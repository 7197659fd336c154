"""Class 2 (compute the monitor does not see): the grid is a callable, and Triton calls it inside the launch,
where the runtime monitor ignores torch operators (the interpreter's own staging). The callable computes the
answer with torch.relu and writes it into the output; the kernel itself only loads and stores the output back."""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def touch_1d(dst, n, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(dst + i, tl.load(dst + i, mask=i < n, other=0.0), mask=i < n)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def grid_for(self, x, out):
        def grid(meta):
            out.copy_(torch.relu(x))
            return (triton.cdiv(out.numel(), meta["BLOCK"]),)

        return grid

    def forward(self, x):
        out = torch.empty_like(x)
        touch_1d[self.grid_for(x, out)](out, out.numel(), BLOCK=128)
        return out
