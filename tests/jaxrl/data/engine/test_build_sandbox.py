"""The build end to end through the real embedded sandbox (Triton interpreter) on hand-written tasks.

Teacher pairs are verified by the real sandbox: a ReLU and a row sum with correct Triton modules, and a
ReLU whose module doubles its result. Reference validation still goes through the fake client, because
this checkout's SandboxClient has no `validate` yet, and the tasks carry no input sets, which it cannot
send yet; both move to the real client when the sandbox's data-engine calls land.
"""

from __future__ import annotations

from engine_fakes import FakeClient, FakeDecontaminator, FakeTokens, corpus, read_jsonl, settings

from jaxrl.data.engine.api import Engine
from jaxrl.data.engine.build import build
from jaxrl.data.engine.tasks import GeneratedTask, TeacherSolution
from sandbox_service.client import SandboxClient

REFERENCE = """import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return {expression}


def get_inputs():
    return [torch.randn({rows}, {cols})]


def get_init_inputs():
    return []
"""
RELU = '''import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def relu_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    keep = offs < n
    x = tl.load(x_ptr + offs, mask=keep, other=0.0)
    tl.store(y_ptr + offs, tl.maximum(x, 0.0), mask=keep)


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        n = x.numel()
        relu_kernel[(triton.cdiv(n, 256),)](x, y, n, BLOCK=256)
        return y
'''
ROW_SUM = '''import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def row_sum_kernel(x_ptr, y_ptr, n_cols, stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * stride + cols, mask=cols < n_cols, other=0.0)
    tl.store(y_ptr + row, tl.sum(x, axis=0))


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        rows, cols = x.shape
        y = torch.empty(rows, device=x.device, dtype=x.dtype)
        row_sum_kernel[(rows,)](x, y, cols, x.stride(0), BLOCK=triton.next_power_of_2(cols))
        return y
'''


def _task(task_id: str, family: str, expression: str, rows: int, cols: int, code: str) -> GeneratedTask:
    return GeneratedTask(task_id, family, (family,), False, "easy", "float32", "cpu",
                         REFERENCE.format(expression=expression, rows=rows, cols=cols),
                         solution=TeacherSolution("One program per block; masked tail.", code))


def hand_written(seed: int, count: int, scale: str = "cpu", families=None) -> list[GeneratedTask]:
    tasks = [
        _task("relu-16x64", "relu", "torch.relu(x)", 16, 64, RELU),
        _task("rowsum-8x32", "rowsum", "x.sum(dim=1)", 8, 32, ROW_SUM),
        _task("relu-8x32", "relu", "torch.relu(x)", 8, 32, RELU.replace("tl.maximum(x, 0.0)", "tl.maximum(x, 0.0) * 2.0")),
    ]
    return tasks[:count]


class Family:
    def __init__(self, name):
        self.name = name


ENGINE = Engine(hand_written, lambda task: "train", lambda: [Family("relu"), Family("rowsum")], FakeDecontaminator)


class RealVerification:
    """Pairs go to the real sandbox; validation and Inductor to the fake."""

    def __init__(self, real: SandboxClient):
        self.real = real
        self.fake = FakeClient()

    def validate(self, reference, input_sets=(), options=None):
        return self.fake.validate(reference, input_sets, options)

    def evaluate(self, reference, candidate, options=None, **kwargs):
        return self.real.evaluate(reference, candidate, options, **kwargs)

    def inductor(self, reference, timeout_s=600.0):
        return self.fake.inductor(reference, timeout_s)


def test_teacher_pairs_are_verified_by_the_real_sandbox(tmp_path):
    with SandboxClient.embedded(backend="interpreter", workers=2) as client:
        result = build(settings(sft_pairs=3, rl_tasks=3, chunk_size=3, max_tasks=3), tmp_path,
                       RealVerification(client), ENGINE, FakeTokens(), corpus(), progress=False)
    sft = read_jsonl(tmp_path / "sft.jsonl")
    assert [r["task_id"] for r in sft] == ["relu-16x64", "rowsum-8x32"]
    assert all(r["verdict"]["status"] == "ok" and r["verdict"]["backend"] == "interpreter" for r in sft)
    assert all(r["verdict"]["trials_passed"] == r["verdict"]["trials"] == 2 for r in sft)
    assert len(read_jsonl(tmp_path / "rl_tasks.jsonl")) == 3
    template = result.summary["counts"]["template"]
    assert (template["attempted"], template["ok"], template["failures"]) == (3, 2, {"incorrect": 1})
    assert not result.summary["targets_met"]  # 2 of 3 pairs: the doubled ReLU is not training data
