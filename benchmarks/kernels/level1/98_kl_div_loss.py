"""KernelBench L1/98 (KL divergence of softmax rows, kl_div(log p, t, 'batchmean')): block partial sums, then one sum.

The term t * (log t - log p) is taken as 0 where t == 0 (torch's xlogy convention)."""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def kl_partial_kernel(p_ptr, t_ptr, partial_ptr, n, BLOCK: tl.constexpr, STEPS: tl.constexpr):
    # each program sums STEPS consecutive blocks
    start = tl.program_id(0).to(tl.int64) * (BLOCK * STEPS)
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for step in range(STEPS):
        offs = start + step * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        p = tl.load(p_ptr + offs, mask=mask, other=1.0)
        t = tl.load(t_ptr + offs, mask=mask, other=0.0)
        acc += tl.where(t > 0.0, t * (tl.log(t) - tl.log(p)), 0.0)
    tl.store(partial_ptr + tl.program_id(0), tl.sum(acc, axis=0))


@triton.jit
def sum_scaled_kernel(values_ptr, out_ptr, n, scale, BLOCK: tl.constexpr):
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for start in range(0, n, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        acc += tl.load(values_ptr + offs, mask=offs < n, other=0.0)
    tl.store(out_ptr, tl.sum(acc, axis=0) * scale)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, predictions, targets):
        predictions, targets = predictions.contiguous(), targets.contiguous()
        n = predictions.numel()
        block, steps = 1024, 8
        programs = triton.cdiv(n, block * steps)
        partials = torch.empty((programs,), device=predictions.device, dtype=torch.float32)
        kl_partial_kernel[(programs,)](predictions, targets, partials, n, BLOCK=block, STEPS=steps, num_warps=8)
        out = torch.empty((), device=predictions.device, dtype=torch.float32)
        # 'batchmean': the sum divided by the size of the first dimension
        sum_scaled_kernel[(1,)](partials, out, programs, 1.0 / predictions.shape[0], BLOCK=1024)
        return out
