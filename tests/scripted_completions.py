"""Scripted completions for CPU-sized KernelBench L1/19 (ReLU), shared by the eval and GRPO tests.

RELU_CORRECT is a known-correct Triton answer (status ok through the real sandbox), RELU_WRONG a valid
kernel with a wrong result, NO_CODE an answer without a code block.
"""

RELU_CORRECT = '''<think>
Element-wise max(x, 0): one program per block of 256 elements, masked tail.
</think>
```python
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def relu_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    keep = offs < n
    x = tl.load(x_ptr + offs, mask=keep, other=0.0)
    tl.store(y_ptr + offs, tl.maximum(x, 0.0), mask=keep)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        n = x.numel()
        relu_kernel[(triton.cdiv(n, 256),)](x, y, n, BLOCK=256)
        return y
```'''
# Doubles the result: a real Triton kernel, valid, but wrong (ReLU's inputs are positive, so an
# identity kernel would pass; twice the value cannot).
RELU_WRONG = RELU_CORRECT.replace("tl.maximum(x, 0.0)", "tl.maximum(x, 0.0) * 2.0")
NO_CODE = "<think>I am not sure how to write this kernel.</think> Use torch.relu."
