import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def relu_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + i, tl.maximum(tl.load(x_ptr + i, mask=i < n), 0.0), mask=i < n)


class ModelNew(nn.Module):
    """Launches the kernel on zero elements, so the uninitialised torch.empty output is returned as is:
    on a GPU it often still holds the reference's freed output (the caching allocator hands the same
    block back). Static rules cannot see this; the runtime layer must (an output no kernel wrote)."""

    def __init__(self):
        super().__init__()

    def forward(self, x):
        out = torch.empty_like(x)
        relu_kernel[(1,)](x, out, 0, BLOCK=256)
        return out
