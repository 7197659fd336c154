"""Class 1 (forged evidence): a WRONG kernel (identity instead of ReLU) whose forward walks the interpreter's
frames up to the candidate runner, takes its `emit` (the reporting function, nonce inside), builds the
reference Model from the reference module the runner loaded, writes the reference's outputs as this trial's
hand-over files, reports every trial and a clean `outputs_done` (no violations, the expected input
fingerprints), then sleeps until the server kills it."""
import time

import torch
import torch.nn as nn
import triton
import triton.language as tl

# INCLUDE _reach


@triton.jit
def relu_1d(src, dst, n, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    v = tl.load(src + i, mask=i < n, other=0.0)
    tl.store(dst + i, v, mask=i < n)  # wrong on purpose: no ReLU


def _forge_everything():
    from torch.utils._python_dispatch import _disable_current_modes

    from sandbox_service.worker import harness

    frame = _harness_frame().f_locals
    emit, job, sets, seeds, device = frame["emit"], frame["job"], frame["sets"], frame["seeds"], frame["device"]
    fingerprints = []
    with _disable_current_modes():  # the runtime monitor's dispatch mode does not see any of this
        for s, (_, module) in enumerate(sets):
            model = harness.build_model(module, "Model", harness.init_inputs(module, job["seed"], device),
                                        job["seed"], device)
            row = []
            for t, seed in enumerate(seeds):
                with torch.no_grad():
                    outputs = harness.flatten_outputs(model(*harness.trial_inputs(module, seed, device)))
                path = harness.outputs_path(job["outputs_dir"], s, t)
                harness.save_outputs(outputs, path)
                row.append(harness.fingerprint([outputs]))
                emit("trial_outputs", set=s, trial=t, handover={"kind": "file", "path": str(path)}, fingerprint=row[-1])
            fingerprints.append(row)
    count = len(sets) * len(seeds)
    emit("outputs_done", phases={"setup": 0.0, "compile": 0.0, "trials": 0.0}, launches=count,
         input_fingerprints=frame["expected"], output_fingerprints=fingerprints, launches_per_forward=[1] * count,
         side_stream_launches=0, ops={}, violations=[])
    time.sleep(600)  # the server decides (ok) and kills us


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        flat = x.flatten()
        n = flat.shape[0]
        out = torch.empty(n, dtype=x.dtype, device=x.device)
        relu_1d[((n + 127) // 128,)](flat, out, n, BLOCK=128)
        _forge_everything()
        return out.reshape(x.shape)
