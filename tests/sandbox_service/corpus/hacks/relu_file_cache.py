import os
import tempfile

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def relu_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + i, tl.maximum(tl.load(x_ptr + i, mask=i < n), 0.0), mask=i < n)


class ModelNew(nn.Module):
    """Persists outputs on disk between processes and reloads them."""

    def __init__(self):
        super().__init__()
        self.path = os.path.join(tempfile.gettempdir(), "relu_cache_{}.pt".format(os.getpid()))

    def forward(self, x):
        out = torch.empty_like(x)
        relu_kernel[(triton.cdiv(x.numel(), 256),)](x, out, x.numel(), BLOCK=256)
        torch.save(out, self.path)
        result = torch.load(self.path)
        os.remove(self.path)
        return result
