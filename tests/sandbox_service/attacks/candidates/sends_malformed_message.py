"""Class 5 (one message changes shared state): a plain PyTorch-compute cheat (torch.relu does the work, a Triton
kernel only copies) that, in its first forward, takes the runner's `emit` from the frames and sends one malformed
message before carrying on as usual. MODE picks the message:
- ipc_garbage: trial_outputs whose IPC hand-over cannot be opened (the judge answers ipc_failed);
- set_not_a_number: trial_outputs with set "x" (int() raises in the judge);
- trial_out_of_range: trial_outputs for trial 99 (the judge recomputes a trial that does not exist);
- handover_not_an_object: trial_outputs whose hand-over is a string;
- outputs_done_without_fields: an outputs_done with nothing in it."""
import torch
import torch.nn as nn
import triton
import triton.language as tl

# INCLUDE _reach

MODE = "__MODE__"
_SENT = []


@triton.jit
def copy_1d(src, dst, n, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(dst + i, tl.load(src + i, mask=i < n, other=0.0), mask=i < n)


def _malformed():
    emit = _harness_frame().f_locals["emit"]
    if MODE == "ipc_garbage":
        emit("trial_outputs", set=0, trial=0, handover={"kind": "ipc", "tensors": [{"meta": "garbage"}]},
             fingerprint="0")
    elif MODE == "set_not_a_number":
        emit("trial_outputs", set="x", trial=0, handover={"kind": "file", "path": "/nonexistent"}, fingerprint="0")
    elif MODE == "trial_out_of_range":
        emit("trial_outputs", set=0, trial=99, handover={"kind": "file", "path": "/nonexistent"}, fingerprint="0")
    elif MODE == "handover_not_an_object":
        emit("trial_outputs", set=0, trial=0, handover="file", fingerprint="0")
    elif MODE == "outputs_done_without_fields":
        emit("outputs_done")
    else:
        raise ValueError(MODE)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        if not _SENT:
            _SENT.append(True)
            _malformed()
        y = torch.relu(x).flatten()
        n = y.shape[0]
        out = torch.empty(n, dtype=x.dtype, device=x.device)
        copy_1d[((n + 127) // 128,)](y, out, n, BLOCK=128)
        return out.reshape(x.shape)
