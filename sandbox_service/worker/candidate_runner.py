"""The candidate child: build ModelNew, run the correctness trials under the runtime monitor, time it.

Order matters for trust. Before the candidate's module is imported, the reference module is loaded
once per input set and every trial's inputs are generated from their seeds and fingerprinted (then
dropped: large problems hold one trial at a time). After the import each trial's inputs are generated
again; their fingerprints must match, or the candidate tampered with input generation. The child never
decides correctness: it hands each trial's outputs to the judge (a file, or CUDA IPC handles for large
outputs) and moves on. The reference model is never built here, so there is no reference output in this
process to steal.

Messages sent (each with the evaluation's nonce): inputs_ready, [build_request], trial_outputs per trial,
compile_error | runtime_error | outputs_done, then on the server's "time": timing (or runtime_error).
"""

from __future__ import annotations

import time
from collections.abc import Callable

import torch

from sandbox_service.options import Policy
from sandbox_service.verifier.runtime import RuntimeMonitor
from sandbox_service.executor.runner import hand_over
from sandbox_service.worker import harness
from sandbox_service.worker.protocol import ChannelClosed, Receiver

Emit = Callable[..., None]


def _is_compile_error(exc: BaseException) -> bool:
    """Triton compilation failures surface at the first launch; they are compile errors, not runtime ones."""
    names = {cls.__name__ for cls in type(exc).__mro__}
    return bool(names & {"CompilationError", "CompileTimeAssertionFailure", "PTXASError", "OutOfResources"})


def _remote_builder(emit: Emit, control: Receiver):
    def request(name, source, library_dirs, include_dirs, libraries):
        emit("build_request", name=name, source=source, library_dirs=library_dirs, include_dirs=include_dirs,
             libraries=libraries)
        answer = control.receive()
        if answer.get("type") != "build_result":
            raise ChannelClosed(f"expected build_result, got {answer.get('type')!r}")
        return answer["path"], answer["sha256"]

    return request


def run(job: dict, emit: Emit, control: Receiver) -> None:
    clock = time.monotonic
    phases: dict[str, float] = {}
    started = clock()
    device = harness.device_for(job["backend"])
    sets = harness.load_problem_sets(job["reference_path"], job["input_sets"], job["seed"])
    seeds = harness.trial_seeds(job["seed"], job["trials"])
    expected = harness.finish_fingerprint_grid(
        [[harness.fingerprint_parts([harness.trial_inputs(module, s, device)]) for s in seeds] for _, module in sets]
    )
    emit("inputs_ready", fingerprints=expected)  # made before any candidate code ran
    init = [harness.init_inputs(module, job["seed"], device) for _, module in sets]
    if job.get("remote_build"):
        harness.install_remote_build(_remote_builder(emit, control))

    monitor = RuntimeMonitor(device)
    monitor.install()
    phases["setup"] = clock() - started
    started = clock()
    phase = "import"
    try:
        candidate = harness.load_module(job["candidate_path"], "tritonrl_candidate")
        phase = "construction"
        models = [harness.build_model(candidate, "ModelNew", init[i], job["seed"], device) for i in range(len(sets))]
    except BaseException as exc:  # noqa: BLE001 - anything the candidate raises, SystemExit included
        emit("compile_error", phase=phase, error=harness.format_exception(exc))
        return
    monitor.check_untampered()
    phases["compile"] = clock() - started
    started = clock()

    input_fingerprints: list[list[list]] = []  # parts, hashed after the last trial
    output_fingerprints: list[list[str]] = []
    for set_index, (_, module) in enumerate(sets):
        input_fingerprints.append([])
        output_fingerprints.append([])
        for trial, trial_seed in enumerate(seeds):
            monitor.check_untampered()
            inputs = harness.trial_inputs(module, trial_seed, device)
            input_fingerprints[-1].append(harness.fingerprint_parts([inputs]))
            used = harness.clone(inputs)
            try:
                with torch.no_grad():
                    with monitor.forward_scope():
                        output = models[set_index](*used)
                        tensors = harness.flatten_outputs(output)
                    harness.synchronize(device)
            except BaseException as exc:  # noqa: BLE001
                kind = "compile_error" if _is_compile_error(exc) else "runtime_error"
                emit(kind, phase=f"{sets[set_index][0]} trial {trial}", error=harness.format_exception(exc))
                return
            monitor.check_after_forward(inputs, used, tensors)
            fingerprint = harness.fingerprint([tensors])
            output_fingerprints[-1].append(fingerprint)
            hand_over(job, emit, control, tensors, set_index, trial, fingerprint)
            del output, tensors, used, inputs
    monitor.check_untampered()
    phases["trials"] = clock() - started
    emit(
        "outputs_done",
        phases=phases,
        launches=monitor.launches,
        input_fingerprints=harness.finish_fingerprint_grid(input_fingerprints),
        output_fingerprints=output_fingerprints,
        launches_per_forward=monitor.launches_per_forward,
        side_stream_launches=monitor.side_stream_launches,
        ops=dict(monitor.ops),
        violations=[v.__dict__ for v in monitor.violations(Policy(job["policy"]))],
    )
    order = control.receive()
    if order["type"] != "time":
        return
    inputs = harness.trial_inputs(sets[0][1], seeds[0], device)
    if harness.fingerprint([inputs]) != expected[0][0]:
        monitor._add("inputs-tampered", "the timing inputs differ from the ones made before the candidate ran")
    _time(job, emit, monitor, models[0], inputs)


def _time(job: dict, emit: Emit, monitor: RuntimeMonitor, model, inputs: list) -> None:
    from sandbox_service import timing

    method = timing.DEVICE_SYNC if monitor.side_stream_launches else timing.CUDA_EVENTS
    launches_before, calls = monitor.launches, job["warmup_runs"] + job["timing_runs"]
    try:
        stats = timing.time_cuda(lambda: model(*inputs), warmup=job["warmup_runs"], runs=job["timing_runs"],
                                 method=method)
    except BaseException as exc:  # noqa: BLE001
        emit("runtime_error", phase="timing", error=harness.format_exception(exc))
        return
    monitor.check_untampered()
    # A forward that launches fewer kernels when timed than when checked is skipping work (e.g. a cache).
    launched = monitor.launches - launches_before
    if launched < calls * min(monitor.launches_per_forward):
        monitor._add("work-skipped-when-timed", f"{launched} launches in {calls} timed calls, fewer than when checked")
    emit("timing", candidate=stats.__dict__, violations=[v.__dict__ for v in monitor.findings])
