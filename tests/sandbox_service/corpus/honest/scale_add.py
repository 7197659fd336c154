import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def scale_add_kernel(x_ptr, y_ptr, out_ptr, scale, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m)
    y = tl.load(y_ptr + offs, mask=m)
    tl.store(out_ptr + offs, x * scale + y, mask=m)


class ModelNew(nn.Module):
    def __init__(self, scale: float):
        super().__init__()
        self.scale = scale
        self.block = 256

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        n = x.numel()
        out = torch.empty_like(x)
        scale = float(self.scale) * 1.0
        blocks = (n + self.block - 1) // self.block
        scale_add_kernel[(blocks,)](x, y, out, scale, n, BLOCK=self.block)
        return out
