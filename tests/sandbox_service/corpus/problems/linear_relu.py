import torch
import torch.nn as nn


class Model(nn.Module):
    """relu(x @ W^T + b) with an nn.Linear owning W and b."""

    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.linear(x))


IN_FEATURES, OUT_FEATURES = 64, 32


def get_inputs():
    return [torch.randn(8, IN_FEATURES)]


def get_init_inputs():
    return [IN_FEATURES, OUT_FEATURES]
