"""The build end to end through the real embedded sandbox (Triton interpreter) on hand-written tasks.

References are validated and teacher pairs verified by the real sandbox, on each task's input sets too:
a ReLU and a row sum with correct Triton modules; a ReLU whose module doubles its result; a ReLU whose
module launches a fixed grid, right on the task's own inputs and wrong on its larger input set; and a
reference with a constant output, which validation rejects. Then generated tasks of families the teacher
has no template for, whose pairs come from the sandbox's Inductor call.
"""

from __future__ import annotations

import pytest
from engine_fakes import FakeDecontaminator, FakeTokens, corpus, read_jsonl, settings

from jaxrl.data.engine.api import Engine
from jaxrl.data.engine.build import build
from jaxrl.data.engine.tasks import GeneratedTask, TeacherSolution
from sandbox_service.client import SandboxClient
from sandbox_service.options import EvalOptions, InputSet
from sandbox_service.results import Status

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


def _task(task_id: str, family: str, expression: str, rows: int, cols: int, code: str,
          other: tuple[int, int]) -> GeneratedTask:
    inputs = InputSet("other_shape", f"def get_inputs():\n    return [torch.randn({other[0]}, {other[1]})]\n")
    return GeneratedTask(task_id, family, (family,), False, "easy", "float32", "cpu",
                         REFERENCE.format(expression=expression, rows=rows, cols=cols), (inputs,),
                         TeacherSolution("One program per block; masked tail.", code))


FIXED_GRID = RELU.replace("relu_kernel[(triton.cdiv(n, 256),)]", "relu_kernel[(4,)]")  # 1024 elements, always


def hand_written(seed: int, count: int, scale: str = "cpu", families=None) -> list[GeneratedTask]:
    tasks = [
        _task("relu-16x64", "relu", "torch.relu(x)", 16, 64, RELU, (40, 64)),
        _task("rowsum-8x32", "rowsum", "x.sum(dim=1)", 8, 32, ROW_SUM, (3, 50)),
        _task("relu-8x32", "relu", "torch.relu(x)", 8, 32, RELU.replace("tl.maximum(x, 0.0)", "tl.maximum(x, 0.0) * 2.0"),
              (8, 40)),
        _task("relu-32x32", "relu", "torch.relu(x)", 32, 32, FIXED_GRID, (40, 64)),
        _task("zeros-8x8", "relu", "torch.zeros_like(x)", 8, 8, RELU, (4, 4)),
    ]
    return tasks[:count]


class Family:
    def __init__(self, name):
        self.name = name


def all_train(heldout, val):
    return lambda task: "train"


ENGINE = Engine(hand_written, lambda: [Family("relu"), Family("rowsum")], FakeDecontaminator, all_train)


def test_references_and_teacher_pairs_go_through_the_real_sandbox(tmp_path):
    with SandboxClient.embedded(backend="interpreter", workers=2) as client:
        result = build(settings(sft_pairs=5, rl_tasks=5, chunk_size=5, max_tasks=5, validate_seeds=2), tmp_path,
                       client, ENGINE, FakeTokens(), corpus(), progress=False)
    rl = read_jsonl(tmp_path / "rl_tasks.jsonl")
    assert [r["task_id"] for r in rl] == ["relu-16x64", "rowsum-8x32", "relu-8x32", "relu-32x32"]
    assert all(r["validation"]["backend"] == "interpreter" and r["validation"]["ref_time_us"] is None for r in rl)
    drops = result.summary["counts"]["drops"]
    assert [(d["stage"], d["count"]) for d in drops] == [("validate", 1)] and drops[0]["reason"].startswith("invalid")

    sft = read_jsonl(tmp_path / "sft.jsonl")
    assert [r["task_id"] for r in sft] == ["relu-16x64", "rowsum-8x32"]
    assert all(r["verdict"]["status"] == "ok" and r["verdict"]["backend"] == "interpreter" for r in sft)
    template = result.summary["counts"]["template"]
    assert (template["attempted"], template["ok"], template["failures"]) == (4, 2, {"incorrect": 2})
    reasons = " ".join(reason for reason, _ in template["reasons"])
    assert "other_shape" in reasons  # the fixed grid fails only on the larger input set
    assert not result.summary["targets_met"]


@pytest.mark.slow
def test_families_without_a_template_get_pairs_from_inductor_that_the_sandbox_accepts(tmp_path):
    from jaxrl.data.engine.api import default_engine

    families = ("var_reduce", "cummin")
    data = dict(sft_pairs=4, rl_tasks=4, chunk_size=4, max_tasks=4, validate_seeds=2, inductor=True, families=families)
    with SandboxClient.embedded(backend="interpreter", workers=2) as client:
        result = build(settings(**data), tmp_path, client, default_engine(), FakeTokens(), corpus(), progress=False)
        sft = read_jsonl(tmp_path / "sft.jsonl")
        tasks = {r["task_id"]: r for r in read_jsonl(tmp_path / "rl_tasks.jsonl")}
        again = [client.evaluate(tasks[r["task_id"]]["code"], r["completion"][0]["content"], options,
                                 input_sets=[InputSet.from_dict(s) for s in tasks[r["task_id"]]["input_sets"]])
                 for r in sft for options in [EvalOptions(trials=2, time=False)]]
    counts = result.summary["counts"]
    assert counts["no_template"] == counts["inductor"]["attempted"] == 4 and counts["template"]["attempted"] == 0
    assert len(sft) == counts["inductor"]["ok"] >= 3 and {r["family"] for r in sft} == set(families)
    assert all(r["origin"] == "inductor" and r["verdict"]["status"] == "ok" for r in sft)
    assert "TorchInductor" in sft[0]["completion"][0]["content"]
    assert [r.status for r in again] == [Status.OK] * len(sft)  # each emitted pair, judged again from the files
