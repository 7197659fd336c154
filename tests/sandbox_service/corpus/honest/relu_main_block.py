import torch
import torch.nn as nn
import triton
import triton.language as tl


class Model(nn.Module):
    """The reference, copied for the self-test below; ModelNew never uses it."""

    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.relu(x)


def get_inputs():
    return [torch.randn(16, 256)]


def get_init_inputs():
    return []


@triton.jit
def _relu(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(y_ptr + offs, tl.maximum(tl.load(x_ptr + offs, mask=m), 0.0), mask=m)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        y = torch.empty_like(x)
        n = x.numel()
        _relu[(triton.cdiv(n, 512),)](x, y, n, BLOCK=512)
        return y


if __name__ == "__main__":
    torch.manual_seed(0)
    inputs = get_inputs()
    expected = Model()(*inputs)
    got = ModelNew()(*inputs)
    assert torch.allclose(got, torch.relu(inputs[0])), (got - expected).abs().max()
    print("ok")
