"""KernelBench L1/95 (cross-entropy, mean over the batch): per-row online logsumexp, then a fixed-order mean."""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def row_loss_kernel(logits_ptr, target_ptr, loss_ptr, classes, stride_row, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    base = logits_ptr + row.to(tl.int64) * stride_row
    cols = tl.arange(0, BLOCK)
    # online logsumexp: running max m and running sum s of exp(x - m), lane by lane
    m = tl.full((BLOCK,), float("-inf"), dtype=tl.float32)
    s = tl.zeros((BLOCK,), dtype=tl.float32)
    for start in range(0, classes, BLOCK):
        x = tl.load(base + start + cols, mask=start + cols < classes, other=float("-inf"))
        m_new = tl.maximum(m, x)
        # lanes that have seen nothing yet keep m = -inf; guard the exp against (-inf) - (-inf)
        scale = tl.where(m_new == float("-inf"), 0.0, tl.exp(m - m_new))
        s = s * scale + tl.where(x == float("-inf"), 0.0, tl.exp(x - m_new))
        m = m_new
    row_max = tl.max(m, axis=0)
    total = tl.sum(s * tl.where(m == float("-inf"), 0.0, tl.exp(m - row_max)), axis=0)
    target = tl.load(target_ptr + row)
    picked = tl.load(base + target)
    tl.store(loss_ptr + row, row_max + tl.log(total) - picked)


@triton.jit
def mean_kernel(values_ptr, out_ptr, n, BLOCK: tl.constexpr):
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for start in range(0, n, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        acc += tl.load(values_ptr + offs, mask=offs < n, other=0.0)
    tl.store(out_ptr, tl.sum(acc, axis=0) / n)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, predictions, targets):
        predictions, targets = predictions.contiguous(), targets.contiguous()
        rows, classes = predictions.shape
        losses = torch.empty((rows,), device=predictions.device, dtype=torch.float32)
        block = min(4096, triton.next_power_of_2(classes))
        row_loss_kernel[(rows,)](predictions, targets, losses, classes, predictions.stride(0), BLOCK=block, num_warps=8)
        out = torch.empty((), device=predictions.device, dtype=torch.float32)
        mean_kernel[(1,)](losses, out, rows, BLOCK=1024)
        return out
