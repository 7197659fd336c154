import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, sam, sak, sbk, sbn, scm, scn,
                  BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in range(0, K, BK):
        rk = k0 + tl.arange(0, BK)
        a = tl.load(a_ptr + rm[:, None] * sam + rk[None, :] * sak, mask=(rm[:, None] < M) & (rk[None, :] < K), other=0.0)
        b = tl.load(b_ptr + rk[:, None] * sbk + rn[None, :] * sbn, mask=(rk[:, None] < K) & (rn[None, :] < N), other=0.0)
        acc += tl.dot(a, b)
    tl.store(c_ptr + rm[:, None] * scm + rn[None, :] * scn, acc, mask=(rm[:, None] < M) & (rn[None, :] < N))


class ModelNew(nn.Module):
    """The kernel is kept on the instance and launched through self."""

    def __init__(self):
        super().__init__()
        self.kernel = matmul_kernel
        self.tiles = {"BM": 16, "BN": 16, "BK": 16}

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        assert A.shape[1] == B.shape[0], f"torch.matmul would reject shapes {tuple(A.shape)} and {tuple(B.shape)}"
        M, K = A.shape
        N = B.shape[1]
        C = torch.empty((M, N), device=A.device, dtype=A.dtype)
        grid = lambda META: (triton.cdiv(M, META["BM"]), triton.cdiv(N, META["BN"]))
        self.kernel[grid](A, B, C, M, N, K, A.stride(0), A.stride(1), B.stride(0), B.stride(1),
                          C.stride(0), C.stride(1), **self.tiles)
        return C
