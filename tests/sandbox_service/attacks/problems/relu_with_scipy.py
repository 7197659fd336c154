"""problems/relu.py with one more import, as some references carry: scipy is installed but not imported by the
sandbox's template, so the first judge or candidate that loads this reference imports it from the import path."""
import scipy  # noqa: F401
import torch
import torch.nn as nn


class Model(nn.Module):
    """Elementwise ReLU."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x)


def get_inputs():
    return [torch.randn(16, 256)]


def get_init_inputs():
    return []
