"""The CUDA kernels every candidate evaluation's harness runs, loaded before the job arrives.

CUDA loads a kernel at its first launch in a process, and loading is a driver call: with candidate
processes making their CUDA contexts all the time, each such call waits its turn behind them (profiled on
an H100: a candidate spent about 0.1 s in its first `masked_fill` and 0.25 s in its first casts and copies).
A candidate process runs the harness's own operations (input generation, fingerprints, the runtime
checks, and a timed batch's own kernels: timing.warm_up) once on a small tensor while it waits for its job, so
that the evaluation finds them loaded.
"""

from __future__ import annotations

import torch

from sandbox_service import timing
from sandbox_service.verifier.runtime import RuntimeMonitor
from sandbox_service.worker import harness

_ELEMENTS = 4096


def load_harness_kernels(device: torch.device) -> None:
    """Run input generation, fingerprints and the runtime checks once on `device` (a CUDA device)."""
    with torch.device(device):
        inputs = [torch.randn(_ELEMENTS), torch.rand(_ELEMENTS), torch.randint(0, 16, (_ELEMENTS,))]
    used = harness.clone(inputs)
    outputs = [used[0].clone()]
    harness.finish_fingerprints([harness.fingerprint_parts([inputs]), harness.fingerprint_parts([outputs])])
    RuntimeMonitor(device).check_after_forward(inputs, used, outputs)
    torch.isnan(outputs[0]).all()
    if device.type == "cuda":
        timing.warm_up(device)
    harness.synchronize(device)
