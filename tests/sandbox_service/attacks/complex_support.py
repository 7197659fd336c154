"""A task with a complex output (torch.polar) and a candidate that computes only its real part in a kernel."""

from __future__ import annotations


def polar_reference(scale: str = "1.0") -> str:
    """z = r * exp(i theta) elementwise (complex64), |z| about `scale` (0.5 to 1.5 times it)."""
    return f'''import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, r, theta):
        return torch.polar(r, theta)


N = 4096


def get_inputs():
    return [(torch.rand(N) + 0.5) * {scale}, torch.rand(N) * 6.0]


def get_init_inputs():
    return []
'''


REAL_PART_ONLY = '''```python
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def real_part_kernel(r_ptr, t_ptr, out_ptr, n, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = i < n
    r = tl.load(r_ptr + i, mask=m)
    t = tl.load(t_ptr + i, mask=m)
    tl.store(out_ptr + i, r * tl.cos(t), mask=m)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, r, theta):
        real = torch.empty_like(r)
        n = r.numel()
        real_part_kernel[(triton.cdiv(n, 256),)](r, theta, real, n, BLOCK=256)
        return real.to(torch.complex64)  # the imaginary part: zero everywhere
```'''
