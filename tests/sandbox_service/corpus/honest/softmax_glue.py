import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def softmax_kernel(in_ptr, out_ptr, in_row_stride, out_row_stride, n_cols, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_SIZE)
    mask = cols < n_cols
    x = tl.load(in_ptr + row * in_row_stride + cols, mask=mask, other=-float("inf"))
    x = x - tl.max(x, axis=0)
    num = tl.exp(x)
    den = tl.sum(num, axis=0)
    tl.store(out_ptr + row * out_row_stride + cols, num / den, mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        shape = x.shape
        x2d = x.reshape(-1, shape[-1]).contiguous()
        n_rows, n_cols = x2d.shape
        BLOCK_SIZE = max(triton.next_power_of_2(n_cols), 16)
        num_warps = 4 if BLOCK_SIZE < 2048 else 8
        padded = n_rows * 2 // 2 + (BLOCK_SIZE - 1) // BLOCK_SIZE * 0  # plain int arithmetic
        assert padded == n_rows and x.shape[0] * 2 == 2 * n_rows
        out = torch.empty_like(x2d)
        softmax_kernel[(n_rows,)](x2d, out, x2d.stride(0), out.stride(0), n_cols,
                                  BLOCK_SIZE=BLOCK_SIZE, num_warps=num_warps)
        return out.view(shape)
