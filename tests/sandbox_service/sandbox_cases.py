"""Shared sources and options for the sandbox tests."""

from __future__ import annotations

from pathlib import Path

from sandbox_service.cli import EXAMPLES
from sandbox_service.options import EvalOptions

FIXTURES = Path(__file__).resolve().parent / "fixtures"


def example(name: str) -> str:
    return (EXAMPLES / f"{name}.py").read_text()


def fixture_candidate(name: str) -> str:
    return (FIXTURES / "candidates" / f"{name}.py").read_text()


REFERENCE = example("scaled_add_reference")
CORRECT = example("scaled_add_correct")
INCORRECT = example("scaled_add_incorrect")
CHEAT = example("scaled_add_cheat")

# Two trials keep the interpreter tests quick; the protocol's default (5) is tested in test_options.
FAST = EvalOptions(trials=2, timeout_s=60, memory_limit_mb=4096)


HALF_REFERENCE = """import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, a, b):
{body}


def get_inputs():
    return [torch.randn(64, 256, dtype=torch.{dtype}), torch.randn(64, 256, dtype=torch.{dtype})]


def get_init_inputs():
    return []
"""
# a + b - a at a thousand times the scale: in 16 bits the large term leaves b only a few bits; in float32, all
CANCELLING = "        big = a * 1000.0\n        return (big + b) - big"


# Candidates that forge messages (run with run_isolated: the static layer would refuse them). Helpers they
# share: the runner's emit/control/job from the stack, a raw frame on the report descriptor (from emit's
# closure), outputs written where and how the candidate likes.
PRELUDE = '''
import json, os, struct, sys
import torch
from safetensors.torch import save_file

FINGERPRINT = "0" * 64


def _runner():
    frame = sys._getframe(1)
    while frame is not None:
        names = frame.f_locals
        if frame.f_code.co_name == "run" and "emit" in names and "control" in names:
            return names["emit"], names["control"], names["job"]
        frame = frame.f_back
    raise RuntimeError("no runner on the stack")


def _raw(payload):
    emit, _, _ = _runner()
    fd = next(c.cell_contents for c in emit.__closure__ if type(c.cell_contents) is int)
    os.write(fd, struct.pack(">I", len(payload)) + payload)


def _path(job, set_index=0, trial=0):
    return os.path.join(job["outputs_dir"], f"set_{set_index}_trial_{trial}.safetensors")


def _ipc(**changes):
    item = {"meta": [0, "ab" * 64, 8 * 4096 * 4, 0, "/torch_1_2_3".encode().hex(), 0, "cd" * 64, False],
            "dtype": "float32", "shape": [8, 4096], "stride": [4096, 1], "offset": 0}
    item.update(changes)
    return {"kind": "ipc", "tensors": [item]}


def _outputs(emit, job, handover, set_index=0, trial=0, **extra):
    emit("trial_outputs", set=set_index, trial=trial, handover=handover, fingerprint=FINGERPRINT, **extra)

'''

_FORGING_KERNEL = CORRECT.replace(
    "    def forward(self, a, b):\n",
    "    def forward(self, a, b):\n        if not _ATTACKED:\n            _ATTACKED.append(1)\n"
    "            _attack(*_runner())\n",
)
assert "_attack(*_runner())" in _FORGING_KERNEL


def forging(attack: str) -> str:
    """The correct kernel, which first runs `attack` (the body of `_attack(emit, control, job)`)."""
    body = "\n".join("    " + line for line in attack.strip().splitlines())
    return f"{PRELUDE}\n_ATTACKED = []\n\n\ndef _attack(emit, control, job):\n{body}\n\n{_FORGING_KERNEL}"
