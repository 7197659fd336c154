"""The candidate child: build ModelNew, run the correctness trials under the runtime monitor, time it.

Order matters for trust: the reference module is loaded, the first trial's inputs are built and
the reference model (for timing) is constructed before the candidate's module is imported. Later
trials' inputs are built after, so large problems hold one trial in memory at a time; their
fingerprints must match the reference child's, or the candidate tampered with input generation. The child
never decides correctness: it writes its outputs to files that the reference child compares.

Messages sent (each with the evaluation's nonce): inputs_ready, compile_error | runtime_error,
outputs_ready, then on the server's "time" message: timing (or runtime_error).
"""

from __future__ import annotations

import time
from collections.abc import Callable

import torch

from sandbox_service.options import Policy
from sandbox_service.verifier.runtime import RuntimeMonitor
from sandbox_service.worker import harness
from sandbox_service.worker.protocol import Receiver

Emit = Callable[..., None]


def _is_compile_error(exc: BaseException) -> bool:
    """Triton compilation failures surface at the first launch; they are compile errors, not runtime ones."""
    names = {cls.__name__ for cls in type(exc).__mro__}
    return bool(names & {"CompilationError", "CompileTimeAssertionFailure", "PTXASError", "OutOfResources"})


def run(job: dict, emit: Emit, control: Receiver) -> None:
    clock = time.monotonic
    phases: dict[str, float] = {}
    started = clock()
    device = harness.device_for(job["backend"])
    reference = harness.load_module(job["reference_path"], "tritonrl_reference")
    init_inputs = harness.init_inputs(reference, job["seed"], device)
    seeds = harness.trial_seeds(job["seed"], job["trials"])
    first_inputs = harness.trial_inputs(reference, seeds[0], device)
    input_fingerprints = [harness.fingerprint([first_inputs])]
    emit("inputs_ready", fingerprint=input_fingerprints[0])  # made before any candidate code ran
    reference_model = None
    if job["time"]:
        reference_model = harness.build_model(reference, "Model", init_inputs, job["seed"], device)

    monitor = RuntimeMonitor(device)
    monitor.install()
    phases["setup"] = clock() - started
    started = clock()
    phase = "import"
    try:
        candidate = harness.load_module(job["candidate_path"], "tritonrl_candidate")
        phase = "construction"
        model = harness.build_model(candidate, "ModelNew", init_inputs, job["seed"], device)
    except BaseException as exc:  # noqa: BLE001 - anything the candidate raises, SystemExit included
        emit("compile_error", phase=phase, error=harness.format_exception(exc))
        return
    monitor.check_untampered()
    phases["compile"] = clock() - started
    started = clock()

    output_fingerprints = []
    for trial, trial_seed in enumerate(seeds):
        if trial == 0:
            inputs = first_inputs
        else:
            # Later trials are made after the candidate ran; the reference child compares their fingerprints.
            monitor.check_untampered()
            inputs = harness.trial_inputs(reference, trial_seed, device)
            input_fingerprints.append(harness.fingerprint([inputs]))
        used = harness.clone(inputs)
        harness.poison_free_memory(device, inputs)
        try:
            with torch.no_grad():
                with monitor.forward_scope():
                    output = model(*used)
                    tensors = harness.flatten_outputs(output)
                harness.synchronize(device)
        except BaseException as exc:  # noqa: BLE001
            kind = "compile_error" if _is_compile_error(exc) else "runtime_error"
            emit(kind, phase=f"trial {trial}", error=harness.format_exception(exc))
            return
        monitor.check_after_forward(inputs, used, tensors)
        output_fingerprints.append(harness.fingerprint([tensors]))
        harness.save_outputs(tensors, harness.outputs_path(job["outputs_dir"], trial))
        del output, tensors, used
        if trial > 0:
            del inputs
    monitor.check_untampered()
    phases["trials"] = clock() - started
    emit(
        "outputs_ready",
        phases=phases,
        launches=monitor.launches,
        input_fingerprints=input_fingerprints,
        output_fingerprints=output_fingerprints,
        launches_per_forward=monitor.launches_per_forward,
        side_stream_launches=monitor.side_stream_launches,
        ops=dict(monitor.ops),
        violations=[v.__dict__ for v in monitor.violations(Policy(job["policy"]))],
    )

    order = control.receive()
    if order["type"] != "time" or reference_model is None:
        return
    _time(job, emit, monitor, model, reference_model, first_inputs)


def _time(job: dict, emit: Emit, monitor: RuntimeMonitor, model, reference_model, inputs: list) -> None:
    from sandbox_service import timing

    method = timing.DEVICE_SYNC if monitor.side_stream_launches else timing.CUDA_EVENTS
    launches_before, calls = monitor.launches, job["warmup_runs"] + job["timing_runs"]
    try:
        candidate_stats = timing.time_cuda(
            lambda: model(*inputs), warmup=job["warmup_runs"], runs=job["timing_runs"], method=method
        )
        reference_stats = timing.time_cuda(
            lambda: reference_model(*inputs), warmup=job["warmup_runs"], runs=job["timing_runs"], method=method
        )
    except BaseException as exc:  # noqa: BLE001
        emit("runtime_error", phase="timing", error=harness.format_exception(exc))
        return
    monitor.check_untampered()
    # A forward that launches fewer kernels when timed than when checked is skipping work (e.g. a cache).
    launched = monitor.launches - launches_before
    if launched < calls * min(monitor.launches_per_forward):
        monitor._add("work-skipped-when-timed", f"{launched} launches in {calls} timed calls, fewer than when checked")
    emit(
        "timing",
        candidate=candidate_stats.__dict__,
        reference=reference_stats.__dict__,
        violations=[v.__dict__ for v in monitor.findings],
    )
