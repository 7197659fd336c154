"""Red team, executor design: the tracer is the candidate's, so it writes program.json itself. check_program
tests membership of values it has not type-checked (`ref not in constant_refs` for a set's constants,
`step["launch"] not in kernels`): a list there raises TypeError, not ProgramError/ValueError, and the
server's _read_program catches only (ValueError, RecursionError)."""
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
    meta = {"shape": [16, 256], "stride": [256, 1], "dtype": "float32"}
    program = {"kernels": {}, "constants": [],
               "sets": [{"inputs": [{"tensor": {"ref": 0, "meta": meta}}], "constants": [[0]],
                         "steps": [], "outputs": [{"ref": 0}]}]}
    with open(os.path.join(os.getcwd(), "program.json"), "w") as f:
        json.dump(program, f)
    emit("program")
    os._exit(0)


_forge()
