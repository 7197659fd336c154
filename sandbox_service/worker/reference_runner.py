"""The reference child: runs only the trusted reference, then compares the candidate's saved outputs.

The candidate's code never runs in this process, so nothing it does can change the comparison.
Messages sent: reference_ready (or reference_error), then, on the server's "compare" message, verdict.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from sandbox_service import correctness
from sandbox_service.options import DEFAULT_TOLERANCE
from sandbox_service.worker import harness
from sandbox_service.worker.protocol import Receiver

Emit = Callable[..., None]
OFFLOAD_BYTES = 1 << 30


def run(job: dict, emit: Emit, control: Receiver) -> None:
    device = harness.device_for(job["backend"])
    try:
        reference = harness.load_module(job["reference_path"], "tritonrl_reference")
        init_inputs = harness.init_inputs(reference, job["seed"], device)
        model = harness.build_model(reference, "Model", init_inputs, job["seed"], device)
        expected, input_fingerprints = [], []
        offload = False
        with torch.no_grad():
            for trial_seed in harness.trial_seeds(job["seed"], job["trials"]):
                inputs = harness.trial_inputs(reference, trial_seed, device)
                input_fingerprints.append(harness.fingerprint([inputs]))
                outputs = [t.detach() for t in harness.flatten_outputs(model(*inputs))]
                # Keep large expected outputs in host memory: the candidate needs the GPU's memory too.
                offload = offload or sum(t.numel() * t.element_size() for t in outputs) > OFFLOAD_BYTES
                expected.append([t.cpu() for t in outputs] if offload else outputs)
                del inputs
        harness.synchronize(device)
    except BaseException as exc:  # noqa: BLE001 - a broken reference is an infrastructure problem
        emit("reference_error", error=harness.format_exception(exc))
        return
    for outputs in expected:
        if any((t.is_floating_point() or t.is_complex()) and not bool(torch.isfinite(t).all()) for t in outputs):
            emit("reference_error", error="the reference produced NaN or Inf outputs")
            return

    tolerance_table = {k: tuple(v) for k, v in job["tolerances"].items()}

    def tolerances(dtype: str) -> tuple[float, float]:
        return tolerance_table.get(dtype, DEFAULT_TOLERANCE)

    degenerate = correctness.degenerate_outputs(expected, tolerances)
    emit(
        "reference_ready",
        input_fingerprints=input_fingerprints,
        degenerate=any(degenerate),
        output_fingerprints=[harness.fingerprint([outputs]) for outputs in expected],
        device=harness.device_name(job["backend"]),
    )
    del model

    order = control.receive()
    if order["type"] != "compare":
        return
    trials = []
    for trial, want in enumerate(expected):
        try:
            got = harness.load_outputs(harness.outputs_path(order["outputs_dir"], trial), device)
        except Exception as exc:  # noqa: BLE001 - unreadable outputs are the candidate's failure
            trials.append({"passed": False, "max_abs_error": None, "message": f"outputs unreadable: {exc}"})
            continue
        want = [t.to(device) for t in want]
        result = correctness.compare_trial(want, got, tolerances, degenerate, job["degenerate_rel_l2"])
        del want, got
        trials.append(result.__dict__)
    emit("verdict", trials=trials)
