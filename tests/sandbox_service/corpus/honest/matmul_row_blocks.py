import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def rows_matmul_kernel(a_ptr, b_ptr, c_ptr, rows, N, K, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    """One program per output row of the slice it is given."""
    r = tl.program_id(0)
    cols = tl.arange(0, BLOCK_N)
    acc = tl.zeros((BLOCK_N,), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        ks = k0 + tl.arange(0, BLOCK_K)
        a = tl.load(a_ptr + r * K + ks, mask=ks < K, other=0.0)
        b = tl.load(b_ptr + ks[:, None] * N + cols[None, :], mask=(ks[:, None] < K) & (cols[None, :] < N), other=0.0)
        acc += tl.sum(a[:, None] * b, axis=0)
    tl.store(c_ptr + r * N + cols, acc, mask=cols < N)


class ModelNew(nn.Module):
    """Launches one kernel per block of rows, on views of the inputs and output."""

    def __init__(self):
        super().__init__()
        self.rows_per_launch = 8

    def forward(self, A, B):
        A = A.contiguous()
        B = B.contiguous()
        M, K = A.shape
        N = B.shape[1]
        C = torch.empty(M, N, dtype=A.dtype, device=A.device)
        for start in range(0, M, self.rows_per_launch):
            stop = min(start + self.rows_per_launch, M)
            rows_matmul_kernel[(stop - start,)](A[start:stop], B, C[start:stop], stop - start, N, K,
                                                BLOCK_N=triton.next_power_of_2(N), BLOCK_K=16)
        return C
