"""Candidates for the relaxed policy's attacks: torch does a matmul in forward, and one Triton kernel that
loads and stores the output unchanged makes it look like kernel work."""

from __future__ import annotations

from pathlib import Path

from sandbox_service.options import EvalOptions, Policy

CORPUS = Path(__file__).resolve().parent.parent / "corpus"
MATMUL = (CORPUS / "problems" / "matmul.py").read_text()
SOFTMAX = (CORPUS / "problems" / "softmax.py").read_text()
RELAXED = EvalOptions(trials=2, timeout_s=60, memory_limit_mb=4096, policy=Policy.RELAXED)

_HEADER = '''```python
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def touch_kernel(y_ptr, n, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + i, tl.load(y_ptr + i, mask=i < n), mask=i < n)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, {params}):
'''
_FOOTER = '''
        out = out.contiguous()
        touch_kernel[(triton.cdiv(out.numel(), 256),)](out, out.numel(), BLOCK=256)
        return out
```'''


def decorated(torch_statements: str, params: str = "a, b") -> str:
    """A candidate whose forward(`params`) runs `torch_statements` (8-space indented, binding `out` from the
    parameters) and then the decorative kernel on `out`."""
    return _HEADER.replace("{params}", params) + torch_statements + _FOOTER
