import torch
import torch.nn as nn


class Model(nn.Module):
    """Mean of each long row of standard normals: every output is ~N(0, 1/512^2), so an all-zero
    output passes atol = rtol = 1e-2 (a degenerate reference)."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.mean(x, dim=1)


def get_inputs():
    return [torch.randn(4, 262144)]


def get_init_inputs():
    return []
