"""RL-sized KernelBench-style problems with several distinct honest Triton candidates each, as a GRPO group
would send them (different block sizes and warps: different sources, so each one compiles on its own).

Two sizes: `gpu` (references of tens of microseconds on an H100, well under the 1 ms RL bound) and `cpu`
(small enough for the Triton interpreter). Used by benchmarks/sandbox_rl_throughput.py.
"""

from __future__ import annotations

import dataclasses

SIZES = {"gpu": {"rows": 4096, "cols": 1024, "mm": 512}, "cpu": {"rows": 16, "cols": 128, "mm": 32}}
BLOCKS = (256, 512, 1024, 2048)

_HEADER = "import torch\nimport torch.nn as nn\n"
_TRITON = "import torch\nimport torch.nn as nn\nimport triton\nimport triton.language as tl\n"


@dataclasses.dataclass(frozen=True)
class Case:
    problem: str
    variant: int
    reference: str
    candidate: str


def _reference(doc: str, forward: str, inputs: str, init: str = "", init_args: str = "") -> str:
    return f'''{_HEADER}

class Model(nn.Module):
    """{doc}"""

    def __init__(self{init_args}):
        super().__init__(){init}

    def forward(self, {forward}


def get_inputs():
    return [{inputs}]


def get_init_inputs():
    return []
'''


def _elementwise(name: str, expression: str, block: int, warps: int) -> str:
    return f'''{_TRITON}

@triton.jit
def {name}_kernel_b{block}(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(x_ptr + offsets, mask=mask, other=0.0)
    tl.store(out_ptr + offsets, {expression}, mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        out = torch.empty_like(x)
        n = x.numel()
        {name}_kernel_b{block}[(triton.cdiv(n, {block}),)](x, out, n, BLOCK={block}, num_warps={warps})
        return out
'''


def _row_kernel(name: str, body: str, cols_block: int, warps: int, store: str) -> str:
    return f'''{_TRITON}

@triton.jit
def {name}_rows_w{warps}(x_ptr, out_ptr, n_cols, stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * stride + cols, mask=mask, other=float("-inf")).to(tl.float32)
{body}
    {store}


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        rows, cols = x.shape
        out = {"torch.empty_like(x)" if name == "softmax" else "torch.empty(rows, device=x.device, dtype=x.dtype)"}
        {name}_rows_w{warps}[(rows,)](x, out, cols, x.stride(0), BLOCK=triton.next_power_of_2(cols), num_warps={warps})
        return out
'''


def _matmul(block: int, warps: int) -> str:
    return f'''{_TRITON}

@triton.jit
def matmul_b{block}_w{warps}(a_ptr, b_ptr, c_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, K, BK):
        a = tl.load(a_ptr + rm[:, None] * K + (k + rk)[None, :], mask=(rm[:, None] < M) & ((k + rk)[None, :] < K), other=0.0)
        b = tl.load(b_ptr + (k + rk)[:, None] * N + rn[None, :], mask=((k + rk)[:, None] < K) & (rn[None, :] < N), other=0.0)
        acc += tl.dot(a, b, input_precision="ieee")
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc, mask=(rm[:, None] < M) & (rn[None, :] < N))


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        a, b = a.contiguous(), b.contiguous()
        M, K = a.shape
        N = b.shape[1]
        c = torch.empty(M, N, device=a.device, dtype=a.dtype)
        grid = (triton.cdiv(M, {block}), triton.cdiv(N, {block}))
        matmul_b{block}_w{warps}[grid](a, b, c, M, N, K, BM={block}, BN={block}, BK=32, num_warps={warps})
        return c
'''


def cases(size: str) -> list[Case]:
    """Five problems x four distinct honest candidates."""
    s = SIZES[size]
    rows, cols, mm = s["rows"], s["cols"], s["mm"]
    relu = _reference("ReLU.", "x):\n        return torch.relu(x)", f"torch.randn({rows}, {cols})")
    gelu = _reference("Tanh-approximated GELU.", "x):\n        return torch.nn.functional.gelu(x, approximate='tanh')",
                      f"torch.randn({rows}, {cols})")
    softmax = _reference("Softmax over rows.", "x):\n        return torch.softmax(x, dim=1)", f"torch.randn({rows}, {cols})")
    rowsum = _reference("Sum of each row.", "x):\n        return x.sum(dim=1)", f"torch.randn({rows}, {cols})")
    matmul = _reference("Matrix product.", "a, b):\n        return a @ b", f"torch.randn({mm}, {mm}), torch.randn({mm}, {mm})")
    gelu_expr = ("0.5 * x * (1.0 + (2.0 * tl.sigmoid(2.0 * (0.7978845608028654 * (x + 0.044715 * x * x * x))) - 1.0))")
    softmax_body = ("    x = x - tl.max(x, axis=0)\n    e = tl.exp(x)\n    y = e / tl.sum(e, axis=0)")
    sum_body = "    y = tl.sum(tl.where(mask, x, 0.0), axis=0)"
    out = []
    for variant, block in enumerate(BLOCKS):
        warps = (1, 2, 4, 8)[variant]
        mm_block = (16, 32, 32, 64)[variant] if size == "gpu" else (16, 16, 32, 32)[variant]
        out += [
            Case("relu", variant, relu, _elementwise("relu", "tl.maximum(x, 0.0)", block, warps)),
            Case("gelu", variant, gelu, _elementwise("gelu", gelu_expr, block, warps)),
            Case("softmax", variant, softmax, _row_kernel("softmax", softmax_body, cols, warps,
                                                          "tl.store(out_ptr + row * stride + cols, y, mask=mask)")),
            Case("row_sum", variant, rowsum, _row_kernel("rowsum", sum_body, cols, warps, "tl.store(out_ptr + row, y)")),
            Case("matmul", variant, matmul, _matmul(mm_block, (2, 4, 4, 8)[variant])),
        ]
    return out
