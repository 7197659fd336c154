"""Executor design: the candidate's process is the attacker's, so it writes the launch program itself: a relu
step (torch compute) hidden as an operator the tracer never saw, then says `program` on its channel.
The server and the executor check the file: the operator is refused whatever the process claims."""
import json
import os

import torch
import torch.nn as nn
import triton
import triton.language as tl

@triton.jit
def copy_1d(src, dst, n, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(dst + i, tl.load(src + i, mask=i < n, other=0.0), mask=i < n)


class ModelNew(nn.Module):
    def forward(self, x):
        out = torch.empty_like(x)
        copy_1d[(triton.cdiv(x.numel(), 128),)](x, out, x.numel(), BLOCK=128)
        return out


def _forge():
    import sys

    frame, emit = sys._getframe(), None
    while frame is not None and emit is None:
        emit = frame.f_locals.get("emit")
        frame = frame.f_back
    if emit is None:
        return
    source = ("def copy_1d(src, dst, n, BLOCK: tl.constexpr):\n"
              "    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)\n"
              "    tl.store(dst + i, tl.load(src + i, mask=i < n, other=0.0), mask=i < n)\n")
    meta = {"shape": [16, 256], "stride": [256, 1], "dtype": "float32"}
    program = {"kernels": {"copy_1d": {"source": source, "globals": {"tl": {"module": "triton.language"}}}},
               "constants": [],
               "sets": [{"inputs": [{"tensor": {"ref": 0, "meta": meta}}], "constants": [],
                         "steps": [{"op": "aten.relu.default", "args": [{"ref": 0}], "kwargs": {}, "out": {"ref": 1}},
                                   {"op": "aten.empty_like.default", "args": [{"ref": 1}], "kwargs": {},
                                    "out": {"ref": 2}},
                                   {"launch": "copy_1d", "args": [{"ref": 1}, {"ref": 2}, 4096],
                                    "configs": [{"grid": [32], "kwargs": {"BLOCK": 128}, "options": {}}]}],
                         "outputs": [{"ref": 2}]}]}
    with open(os.path.join(os.getcwd(), "program.json"), "w") as f:
        json.dump(program, f)
    print("attempted-forged-program", flush=True)
    emit("program")
    os._exit(0)


_forge()
