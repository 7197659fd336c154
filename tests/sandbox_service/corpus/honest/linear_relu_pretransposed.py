import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def linear_relu_kt_kernel(x_ptr, wt_ptr, b_ptr, y_ptr, M, N, K,
                          BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    """y = relu(x @ wt + b) with wt = W^T stored K-major."""
    pm = tl.program_id(0)
    pn = tl.program_id(1)
    rm = pm * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pn * BLOCK_N + tl.arange(0, BLOCK_N)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        rk = k0 + tl.arange(0, BLOCK_K)
        x = tl.load(x_ptr + rm[:, None] * K + rk[None, :], mask=(rm[:, None] < M) & (rk[None, :] < K), other=0.0)
        w = tl.load(wt_ptr + rk[:, None] * N + rn[None, :], mask=(rk[:, None] < K) & (rn[None, :] < N), other=0.0)
        acc += tl.dot(x, w)
    acc += tl.load(b_ptr + rn, mask=rn < N, other=0.0)[None, :]
    tl.store(y_ptr + rm[:, None] * N + rn[None, :], tl.maximum(acc, 0.0), mask=(rm[:, None] < M) & (rn[None, :] < N))


class ModelNew(nn.Module):
    """Preprocesses the weight once in __init__ (a layout change of a parameter, not of any input)."""

    def __init__(self, in_features, out_features):
        super().__init__()
        linear = nn.Linear(in_features, out_features)
        with torch.no_grad():
            self.register_buffer("weight_t", linear.weight.t().contiguous())
            self.register_buffer("bias", linear.bias.detach().clone())

    def forward(self, x):
        M, K = x.shape
        N = self.weight_t.shape[1]
        y = torch.empty((M, N), device=x.device, dtype=x.dtype)
        linear_relu_kt_kernel[(triton.cdiv(M, 16), triton.cdiv(N, 16))](
            x, self.weight_t, self.bias, y, M, N, K, BLOCK_M=16, BLOCK_N=16, BLOCK_K=32)
        return y
