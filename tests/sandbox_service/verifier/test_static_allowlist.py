"""The static layer's allow-lists against every honest kernel the repository has, without running any.

Honest sources: the corpus's honest candidates, benchmarks/kernels, the correct example, every solution the
data engine's teacher renders (every templated family, several seeds, both scales) and the modules the
Inductor converter writes from the recorded captures. None may break a static rule under either policy:
an allow-list that rejects honest code costs it its whole reward.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from jaxrl.data.engine import generate_task
from jaxrl.data.engine.families import FAMILIES
from sandbox_service.inductor.convert import GraphArgument, GraphCapture, convert
from sandbox_service.options import Policy
from sandbox_service.verifier.static import allowlist
from sandbox_service.verifier.static_rules import check_static

REPO = Path(__file__).resolve().parents[3]
TEACHER_SEEDS = range(6)
CAPTURES = REPO / "tests" / "sandbox_service" / "inductor" / "fixtures" / "captures"


def honest_sources() -> dict[str, str]:
    """Every honest kernel module, by `<source>/<name>`."""
    sources = {f"corpus/{p.name}": p.read_text() for p in sorted((REPO / "tests/sandbox_service/corpus/honest").glob("*.py"))}
    sources |= {f"benchmarks/{p.name}": p.read_text() for p in sorted((REPO / "benchmarks/kernels").rglob("*.py"))}
    sources["examples/scaled_add_correct.py"] = (REPO / "sandbox_service/examples/scaled_add_correct.py").read_text()
    for name, family in FAMILIES.items():
        if family.templated:
            for scale in ("cpu", "full"):
                for seed in TEACHER_SEEDS:
                    sources[f"teacher/{name}-{scale}-{seed}"] = generate_task(name, seed, scale).solution.code
    for path in sorted(CAPTURES.glob("*.json")):
        if path.name.startswith("linear_relu"):
            continue  # Inductor calls extern_kernels for the matmul: the converter refuses it
        record = json.loads(path.read_text())
        capture = GraphCapture(record["wrapper"], tuple(GraphArgument(**a) for a in record["arguments"]),
                               record["outputs"], record["returns_tuple"])
        reference = (path.parent.parent / f"{path.name.split('.')[0]}.py").read_text()
        sources[f"inductor/{path.stem}"] = convert(reference, capture).source
        sources[f"inductor/{path.stem}-portable"] = convert(reference, capture, portable=True).source
    return sources


SOURCES = honest_sources()


def test_every_source_of_honest_kernels_is_covered():
    counts = Counter(name.split("/")[0] for name in SOURCES)
    templated = sum(family.templated for family in FAMILIES.values())
    assert counts["corpus"] >= 15 and counts["benchmarks"] >= 14 and counts["examples"] == 1
    assert counts["teacher"] == templated * 2 * len(TEACHER_SEEDS) and templated >= 60
    assert counts["inductor"] == 16


@pytest.mark.parametrize("name", sorted(SOURCES))
def test_honest_kernels_pass_the_static_layer_under_both_policies(name):
    code = SOURCES[name]
    assert [(v.rule, v.line, v.message) for v in check_static(code, Policy.STRICT)] == []
    assert [(v.rule, v.line, v.message) for v in check_static(code, Policy.RELAXED)] == []


# Idioms of Triton's tutorials and of model-written kernels that the allow-lists admit on purpose.
TUTORIAL_IDIOMS = '''\
"""Plausible honest idioms from Triton's tutorials and LLM-written kernels."""
from __future__ import annotations

import math
import os
import functools
import itertools
import warnings
from dataclasses import dataclass
from typing import Optional, Tuple, List, TYPE_CHECKING

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch import Tensor
import triton
import triton.language as tl
from triton.runtime import driver
from triton.language.extra import libdevice

__all__ = ["ModelNew"]
DEVICE = triton.runtime.driver.active.get_active_torch_device()
INTERPRET = os.environ.get("TRITON_INTERPRET", "0") == "1"


def is_hip():
    return triton.runtime.driver.active.get_current_target().backend == "hip"


def is_cuda_new():
    return torch.cuda.is_available() and torch.cuda.get_device_capability()[0] >= 9 and torch.version.cuda is not None


@dataclass
class Cfg:
    block: int = 1024
    warps: int = 4


@triton.autotune(configs=[triton.Config({"BLOCK": b}, num_warps=w) for b, w in itertools.product([256, 512], [4])], key=["n"])
@triton.jit
def softmax_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=-float("inf"))
    y = tl.exp(x - tl.max(x, axis=0))
    tl.store(out_ptr + offs, libdevice.tanh(y / tl.sum(y, axis=0)), mask=mask)


@functools.lru_cache(maxsize=None)
def num_sms(index: int) -> int:
    properties = driver.active.utils.get_device_properties(index)
    return properties["multiprocessor_count"]


def prepare(x_ptr_kernel, x: Tensor) -> None:
    kernel = x_ptr_kernel.warmup(x, x, x.numel(), BLOCK=256, grid=(1,))
    kernel._init_handles()
    n_regs = kernel.n_regs
    assert n_regs >= 0


class ModelNew(nn.Module):
    def __init__(self, dim: int = 1, cfg: Optional[Cfg] = None) -> None:
        super(ModelNew, self).__init__()
        self.dim = dim
        self.cfg = cfg or Cfg()
        self.weight = nn.Parameter(torch.empty(4))
        nn.init.kaiming_uniform_(self.weight.view(2, 2), a=math.sqrt(5))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.numel() == 0:
            warnings.warn(f"{self.__class__.__name__}: empty input of shape {tuple(x.shape)}")
        x = x.contiguous()
        out = torch.empty_like(x)
        n = x.numel()
        grid = lambda meta: (triton.cdiv(n, meta["BLOCK"]),)
        softmax_kernel[grid](x, out, n)
        label = "{}x{}".format(*x.shape[:2]) if x.dim() >= 2 else str(n)
        assert label and torch.__version__ and triton.__version__
        return out


if __name__ == "__main__":
    x = torch.randn(4, 1024, device=DEVICE)
    torch.testing.assert_close(ModelNew()(x), torch.softmax(x, -1))
'''


def test_tutorial_idioms_pass_the_static_layer_under_both_policies():
    compile(TUTORIAL_IDIOMS, "<idioms>", "exec")
    assert [(v.rule, v.line) for v in check_static(TUTORIAL_IDIOMS, Policy.STRICT)] == []
    assert [(v.rule, v.line) for v in check_static(TUTORIAL_IDIOMS, Policy.RELAXED)] == []


@pytest.mark.parametrize("path, problem", [
    ("torch.matmul", None),
    ("torch.nn.functional.relu", None),
    ("torch.nn.Linear", None),
    ("torch.Tensor.view.__call__", None),
    ("triton.language.extra.cuda.libdevice.tanh", None),
    ("triton.runtime.driver.active.utils.get_device_properties", None),
    ("math.sqrt", None),
    ("os.environ.get", None),
    ("torch.version.cuda", None),
    ("gc.get_objects", None),  # not an allowed module: its import is reported instead
    ("torch.os", "a module reached through torch"),
    ("torch.nn.functional.np", "a module reached through torch.nn.functional"),
    ("typing.sys", "a module reached through typing"),
    ("torch.utils.data", "a module reached through torch"),
    ("torch.cuda.memory", "a module reached through torch.cuda"),
    ("triton.knobs", "a module reached through triton"),
    ("triton.set_allocator", "a name outside the allow-list of triton"),
    ("torch.ops.load_library", "a name outside the allow-list of torch.ops"),
    ("triton.language._semantic", "a name outside the allow-list of triton.language"),
])
def test_attribute_paths_are_judged_by_namespace(path, problem):
    found = allowlist.attribute_problem(path)
    assert (found is None) if problem is None else (problem in found), found
