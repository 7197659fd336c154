"""KernelBench L1/50 (Conv2d 3->96, kernel 11, stride 4, padding 2, with bias): implicit GEMM.

GEMM view: M = output pixels (batch x OH x OW), N = output channels, K = C x KH x KW. Each program
gathers its [BLOCK_M, BLOCK_K] patch tile straight from the input (zero padding by masking), so no
im2col buffer is ever written."""
import math

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def conv2d_kernel(
    x_ptr, w_ptr, bias_ptr, out_ptr,
    C, H, W, OC, OH, OW, KH, KW, stride, padding, M, K,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
):
    pix = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    och = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    ks = tl.arange(0, BLOCK_K)
    plane = OH * OW
    b = pix // plane
    p = pix % plane
    ih0 = (p // OW) * stride - padding
    iw0 = (p % OW) * stride - padding
    pix_in = pix < M
    och_in = och < OC
    x_base = b.to(tl.int64) * C * H * W
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        k = k0 + ks
        k_in = k < K
        c = k // (KH * KW)
        r = k % (KH * KW)
        ih = ih0[:, None] + (r // KW)[None, :]
        iw = iw0[:, None] + (r % KW)[None, :]
        inside = (ih >= 0) & (ih < H) & (iw >= 0) & (iw < W)
        a_mask = pix_in[:, None] & k_in[None, :] & inside
        a = tl.load(x_ptr + x_base[:, None] + (c[None, :] * H + ih) * W + iw, mask=a_mask, other=0.0)
        # weight [OC, C, KH, KW] is a row-major [OC, K] matrix: element (k, n) of the B operand is w[n, k]
        w = tl.load(w_ptr + och[None, :] * K + k[:, None], mask=k_in[:, None] & och_in[None, :], other=0.0)
        acc = tl.dot(a, w, acc, input_precision="tf32x3")
    acc += tl.load(bias_ptr + och, mask=och_in, other=0.0)[None, :]
    out_offs = (b.to(tl.int64) * OC * plane + p)[:, None] + (och * plane)[None, :]
    tl.store(out_ptr + out_offs, acc, mask=pix_in[:, None] & och_in[None, :])


class ModelNew(nn.Module):
    def __init__(self, num_classes=1000):
        super().__init__()
        in_channels, out_channels, kernel = 3, 96, 11
        self.stride, self.padding = 4, 2
        self.weight = nn.Parameter(torch.empty(out_channels, in_channels, kernel, kernel))
        self.bias = nn.Parameter(torch.empty(out_channels))
        # the same initialisation, in the same order, as nn.Conv2d.reset_parameters
        nn.init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        bound = 1.0 / math.sqrt(in_channels * kernel * kernel)
        nn.init.uniform_(self.bias, -bound, bound)

    def forward(self, x):
        x = x.contiguous()
        weight = self.weight.contiguous()
        batch, channels, height, width = x.shape
        out_channels, _, kh, kw = weight.shape
        oh = (height + 2 * self.padding - kh) // self.stride + 1
        ow = (width + 2 * self.padding - kw) // self.stride + 1
        out = torch.empty((batch, out_channels, oh, ow), device=x.device, dtype=torch.float32)
        m, k = batch * oh * ow, channels * kh * kw
        block_m, block_k = 128, 32
        block_n = min(128, triton.next_power_of_2(out_channels))
        grid = (triton.cdiv(m, block_m), triton.cdiv(out_channels, block_n))
        conv2d_kernel[grid](
            x, weight, self.bias, out, channels, height, width, out_channels, oh, ow, kh, kw,
            self.stride, self.padding, m, k, BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_K=block_k,
            num_warps=8, num_stages=3,
        )
        return out
