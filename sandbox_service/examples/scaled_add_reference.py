"""Example problem (used by `python -m sandbox_service demo` and the tests). A small KernelBench-style problem: out = alpha * a + b + bias (fp32)."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, alpha: float):
        super().__init__()
        self.alpha = alpha
        self.bias = nn.Parameter(torch.randn(N))

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return self.alpha * a + b + self.bias


N = 4096


def get_inputs():
    return [torch.randn(8, N), torch.randn(8, N)]


def get_init_inputs():
    return [0.5]
