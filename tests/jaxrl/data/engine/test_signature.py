"""op_signature reads any KernelBench-format source: every spelling of an operator gives one name."""

from __future__ import annotations

import pytest

from jaxrl.data.engine import op_signature

HEADER = "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n\n"


def module(forward: str, init: str = "", args: str = "") -> str:
    body = "\n".join(f"        {line}" for line in init.splitlines()) if init else "        pass"
    lines = "\n".join(f"        {line}" for line in forward.splitlines())
    return (f"{HEADER}class Model(nn.Module):\n    def __init__(self{args}):\n        super().__init__()\n{body}\n\n"
            f"    def forward(self, x, y=None):\n{lines}\n\ndef get_inputs():\n    return [torch.randn(4, 4)]\n")


@pytest.mark.parametrize("forward, init", [
    ("return torch.relu(x)", ""),
    ("return F.relu(x)", ""),
    ("return x.relu()", ""),
    ("return torch.clamp(x, min=0)", ""),
    ("return x.clamp(min=0.0)", ""),
    ("return torch.nn.functional.relu(x)", ""),
    ("return self.act(x)", "self.act = nn.ReLU()"),
    ("return nn.ReLU()(x)", ""),
    ("h = self.act\nreturn h(x)", "self.act = nn.ReLU(inplace=True)"),
])
def test_every_spelling_of_relu_is_relu(forward, init):
    assert op_signature(module(forward, init)) == ("relu",)


@pytest.mark.parametrize("forward, expected", [
    ("return torch.matmul(x, y)", ("matmul",)),
    ("return x @ y", ("matmul",)),
    ("return torch.mm(x, y)", ("matmul",)),
    ("return torch.bmm(x, y)", ("matmul",)),
    ("return torch.matmul(x.T, y)", ("transpose", "matmul")),
    ("return x.mm(y.t())", ("transpose", "matmul")),
    ("return torch.clamp(x, -1.0, 1.0)", ("clamp",)),
    ("return F.hardtanh(x, min_val=-2.0, max_val=2.0)", ("clamp",)),
    ("return torch.clamp(x, min=0.5)", ("clamp",)),
    ("return F.gelu(x, approximate='tanh')", ("gelu_tanh",)),
    ("return torch.max(x, dim=1)[0]", ("max",)),
    ("return torch.max(x, 1).values", ("max",)),
    ("return torch.max(x, y)", ("maximum",)),
    ("return x.amax(-1)", ("max",)),
    ("return x ** 2 + 1", ("square", "add")),
    ("return 1 - x * y", ("mul", "sub")),
    ("return -x", ("neg",)),
    ("s = x.size(0)\nreturn x.view(s, -1).float() * 2", ("reshape", "mul")),
    ("return torch.cummax(x, dim=1)[0]", ("cummax",)),
    ("return F.smooth_l1_loss(x, y)", ("huber_loss",)),
    ("return torch.linalg.vector_norm(x, dim=1)", ("norm",)),
])
def test_canonical_names_and_execution_order(forward, expected):
    assert op_signature(module(forward)) == expected


def test_linear_modules_and_functions_count_their_bias():
    assert op_signature(module("return self.fc(x)", "self.fc = nn.Linear(4, 8)")) == ("matmul", "add")
    assert op_signature(module("return self.fc(x)", "self.fc = nn.Linear(4, 8, bias=False)")) == ("matmul",)
    assert op_signature(module("return F.linear(x, self.w, self.b)", "self.w = nn.Parameter(torch.randn(8, 4))\n"
                                                                          "self.b = nn.Parameter(torch.randn(8))")) \
        == ("matmul", "add")


def test_sequential_modules_helper_methods_and_functions_are_followed():
    source = module("x = self.body(x)\nreturn self.head(x)",
                    "self.body = nn.Sequential(nn.Linear(4, 4), nn.GELU(), nn.LayerNorm(4))")
    source = source.replace("\ndef get_inputs", "    def head(self, t):\n        return scale(t.softmax(-1))\n\n"
                                               "def scale(t):\n    return t * 2\n\ndef get_inputs")
    assert op_signature(source) == ("matmul", "add", "gelu", "layer_norm", "softmax", "mul")


def test_arithmetic_on_numbers_alone_is_not_an_operation():
    source = module("s = self.a * 2 + self.b\nreturn x * s", "self.a = a\nself.b = 1.0", args=", a")
    assert op_signature(source) == ("mul",)


def test_kernelbench_problems_have_signatures(kernelbench_rows):
    by_name = {(r["level"], r["name"]): op_signature(r["code"]) for r in kernelbench_rows if r["level"] in (1, 2)}
    assert by_name[(1, "19_ReLU")] == ("relu",)
    assert by_name[(1, "100_HingeLoss")] == ("mul", "sub", "relu", "mean")
    assert by_name[(1, "98_KLDivLoss")] == ("log", "kl_div")
    assert by_name[(2, "12_Gemm_Multiply_LeakyReLU")] == ("matmul", "add", "mul", "leaky_relu")
    assert by_name[(2, "76_Gemm_Add_ReLU")] == ("matmul", "add", "relu")
    assert sum(bool(sig) for sig in by_name.values()) == len(by_name)


def test_a_source_without_a_model_is_an_error():
    with pytest.raises(ValueError, match="no Model"):
        op_signature("import torch\n\ndef f(x):\n    return x\n")
