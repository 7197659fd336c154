"""The validator child: a reference checked against itself, in a fresh process that may die.

For the reference's own inputs and each input set: the model builds, runs on several seeds, gives
finite outputs, gives the same outputs when built and run again from the same seed (deterministic),
gives different outputs for different inputs (it does not ignore them), and is not degenerate (a
constant or zeros would not pass the tolerance). A reference with float16 or bfloat16 outputs, inputs or
parameters must also agree, within its outputs' tolerance, with itself computed in float32: one that does
not (a long scan accumulated in half precision, say) would fail every kernel that computes more precisely
than it does, so its verdicts would be noise. Its peak memory is measured, and on the GPU its time,
while the server holds the GPU for it alone. A reference that raises, hangs or blows its memory costs
only this process.

A job holds one or more references (`ValidateBatch`), validated one after another. Messages per reference:
begin, then load_error, or estimate (the memory it needs, worker/sizing.py) -> on "go": set_report per
input set, then (timed) ready_to_time -> on "time": timing; finally done. Between references the process
frees what the last one left on the GPU.
"""

from __future__ import annotations

import copy
import resource
from collections.abc import Callable

import torch

from sandbox_service import correctness
from sandbox_service.options import DEFAULT_TOLERANCE
from sandbox_service.worker import handover, harness, sizing
from sandbox_service.worker.protocol import Receiver

Emit = Callable[..., None]
_HALF_DTYPES = (torch.float16, torch.bfloat16)
_HALF_DTYPE_NAMES = tuple(correctness.dtype_name(dtype) for dtype in _HALF_DTYPES)
# The float32 comparison copies the model and the inputs at up to twice their size; beyond this many bytes of
# parameters, buffers, inputs and outputs it is skipped rather than risk memory the process was not given.
FLOAT32_CHECK_MAX_BYTES = 1 << 30


def _close(a: list[torch.Tensor], b: list[torch.Tensor], tolerances) -> bool:
    if len(a) != len(b):
        return False
    for x, y in zip(a, b):
        if x.shape != y.shape or x.dtype != y.dtype:
            return False
        atol, rtol = tolerances(correctness.dtype_name(x.dtype))
        if not correctness.within(x, y, atol, rtol):
            return False
    return True


def _check_set(module, job: dict, device: torch.device, tolerances) -> tuple[dict, torch.nn.Module | None]:
    report = {"ok": False, "reason": "", "deterministic": False, "varies_with_seed": False, "degenerate": False,
              "finite": False, "output_shapes": [], "output_dtypes": [], "input_bytes": 0, "output_bytes": 0,
              "peak_memory_mb": 0.0}
    seed = int(job["seed"])
    seeds = harness.trial_seeds(seed, max(2, int(job["seeds"])))
    _reset_peak_memory(device)
    try:
        init = harness.init_inputs(module, seed, device)
        model = harness.build_model(module, "Model", init, seed, device).eval()
        first, bands, half_inputs = None, [], False
        for index, trial_seed in enumerate(seeds):
            inputs = harness.trial_inputs(module, trial_seed, device)
            half_inputs = half_inputs or any(isinstance(t, torch.Tensor) and t.dtype in _HALF_DTYPES for t in inputs)
            with torch.no_grad():
                outputs = [t.detach() for t in harness.flatten_outputs(model(*inputs))]
            harness.synchronize(device)
            report["input_bytes"] = max(report["input_bytes"],
                                        handover.total_bytes([t for t in inputs if isinstance(t, torch.Tensor)]))
            report["output_bytes"] = max(report["output_bytes"], handover.total_bytes(outputs))
            if not all(correctness.all_finite(t) for t in outputs):
                report["reason"] = f"non-finite outputs (NaN or Inf) for seed {trial_seed}"
                return report, None
            bands.append(correctness.degenerate_bands(outputs, tolerances))
            if index == 0:
                first = outputs
                report["output_shapes"] = [list(t.shape) for t in outputs]
                report["output_dtypes"] = [correctness.dtype_name(t.dtype) for t in outputs]
            elif index == 1:
                report["varies_with_seed"] = not _close(first, outputs, tolerances)
            del inputs, outputs  # one trial's outputs besides the first: large references fit
        report["finite"] = True
        again_model = harness.build_model(module, "Model", harness.init_inputs(module, seed, device), seed, device).eval()
        again_inputs = harness.trial_inputs(module, seeds[0], device)
        # Another random state before forward: randomness inside forward (dropout) shows up as a difference,
        # since a candidate's process can never reproduce the reference's random stream.
        harness.seed_everything(seeds[0] ^ 0x5EED)
        with torch.no_grad():
            again = [t.detach() for t in harness.flatten_outputs(again_model(*again_inputs))]
        harness.synchronize(device)
        del again_model
        report["deterministic"] = _close(first, again, tolerances)
        report["degenerate"] = any(correctness.degenerate_from_bands(bands))
    except torch.cuda.OutOfMemoryError as exc:
        report["reason"] = f"out of GPU memory: {str(exc).splitlines()[0][:300]}"
        return report, None
    except BaseException as exc:  # noqa: BLE001 - the reference's failure is the report
        report["reason"] = "raises: " + harness.format_exception(exc).strip().splitlines()[-1][:500]
        return report, None
    finally:
        report["peak_memory_mb"] = _peak_memory_mb(device)
    del first, again, again_inputs  # room for the float32 check
    if not report["deterministic"]:
        report["reason"] = "not deterministic: the same seed gave different outputs"
    elif report["degenerate"]:
        report["reason"] = "degenerate outputs: a constant would pass the tolerance"
    elif not report["varies_with_seed"]:
        report["reason"] = "the outputs do not change with the inputs"
    elif _uses_16_bit(model, half_inputs, report["output_dtypes"]) and (drift := _float32_drift(
            model, module, seeds, device, tolerances, report["input_bytes"] + report["output_bytes"])):
        report["reason"] = f"unstable in its precision: {drift}"
    else:
        report["ok"] = True
    return report, model


def _float32_drift(model: torch.nn.Module, module, seeds: list[int], device: torch.device, tolerances,
                   io_bytes: int) -> str:
    """Which floating output (if any), on which of the validation's seeds, is not within its tolerance of
    the same reference with its 16-bit parameters and inputs in float32; "" when they agree or the check
    cannot run (too large for the memory the lane reserved, or the reference does not run in float32: then
    its own precision is all there is). A float32 run that breaks the CUDA context is the reference's
    fault: its reason says so, and the process goes no further (`run` finds the device broken)."""
    if io_bytes + handover.total_bytes(_tensors(model)) > FLOAT32_CHECK_MAX_BYTES:
        return ""
    try:
        wide_model = copy.deepcopy(model)
        for tensor in _tensors(wide_model):
            tensor.data = _widen(tensor.data)
        for trial_seed in seeds:
            with torch.no_grad():
                outputs = harness.flatten_outputs(model(*harness.trial_inputs(module, trial_seed, device)))
                # inputs made again: a forward that changes its inputs in place changes only its own
                wide = harness.flatten_outputs(wide_model(*map(_widen, harness.trial_inputs(module, trial_seed, device))))
            if len(wide) != len(outputs):
                return ""
            for index, (low, high) in enumerate(zip(outputs, wide)):
                if not low.is_floating_point() or high.shape != low.shape:
                    continue
                atol, rtol = tolerances(correctness.dtype_name(low.dtype))
                if not correctness.within(high.to(low.dtype), low, atol, rtol):
                    worst = (high.float() - low.float()).abs().max().item()
                    return (f"output {index} ({correctness.dtype_name(low.dtype)}) for seed {trial_seed} is not within "
                            f"atol={atol:g} rtol={rtol:g} of the same reference computed in float32 (largest "
                            f"difference {worst:.3g}), so a kernel more precise than the reference would fail")
    except Exception as exc:  # noqa: BLE001 - float32 is not this reference's contract; nothing to compare
        try:
            harness.synchronize(device)
        except Exception:  # noqa: BLE001 - a device-side assert: this process's CUDA context is gone
            return "its float32 run broke the CUDA context: " + harness.format_exception(exc).strip().splitlines()[-1][:300]
    return ""


def _widen(value):
    """A float16 or bfloat16 tensor as float32; anything else as it is."""
    return value.float() if isinstance(value, torch.Tensor) and value.dtype in _HALF_DTYPES else value


def _tensors(model: torch.nn.Module) -> list[torch.Tensor]:
    """The model's parameters and buffers."""
    return [*model.parameters(), *model.buffers()]


def _uses_16_bit(model: torch.nn.Module, half_inputs: bool, output_dtypes: list[str]) -> bool:
    return half_inputs or any(name in _HALF_DTYPE_NAMES for name in output_dtypes) or any(
        t.dtype in _HALF_DTYPES for t in _tensors(model))


def _peak_memory_mb(device: torch.device) -> float:
    if device.type == "cuda":
        return round(torch.cuda.max_memory_allocated() / 2**20, 1)
    try:  # the process's resident peak since _reset_peak_memory (Linux), not since the process began
        with open("/proc/self/status") as status:
            return round(next(int(line.split()[1]) for line in status if line.startswith("VmHWM:")) / 1024, 1)
    except (OSError, StopIteration, ValueError):
        return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def _reset_peak_memory(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats()
        return
    try:
        with open("/proc/self/clear_refs", "w") as clear:
            clear.write("5")  # resets VmHWM to the current resident size
    except OSError:
        pass


def _global_state() -> tuple:
    """Settings a reference may change that would change how the next one runs."""
    return (torch.get_default_dtype(), torch.is_grad_enabled(), torch.backends.cuda.matmul.allow_tf32,
            torch.backends.cudnn.allow_tf32, torch.are_deterministic_algorithms_enabled(), torch.get_num_threads())


def _restore_global_state(state: tuple) -> None:
    dtype, grad, matmul_tf32, cudnn_tf32, deterministic, threads = state
    torch.set_default_dtype(dtype)
    torch.set_grad_enabled(grad)
    torch.backends.cuda.matmul.allow_tf32 = matmul_tf32
    torch.backends.cudnn.allow_tf32 = cudnn_tf32
    torch.use_deterministic_algorithms(deterministic)
    torch.set_num_threads(threads)


def run(job: dict, emit: Emit, control: Receiver) -> None:
    """Validate each of the job's items in turn; a reference's failure is its own report, never the process's."""
    device = harness.device_for(job["backend"])
    table = {k: tuple(v) for k, v in job["tolerances"].items()}

    def tolerances(dtype: str) -> tuple[float, float]:
        return table.get(dtype, DEFAULT_TOLERANCE)

    defaults = _global_state()
    for index, item in enumerate(job["items"]):
        emit("begin", index=index)
        if not _validate(item, job, device, tolerances, emit, control):
            return
        emit("done", device=harness.device_name(job["backend"]))
        # What one reference leaves must not change the next one's verdict: its modules go, known global
        # settings are put back, and a process whose device is broken (a device-side assert) stops here, so
        # that the references after it go on in a fresh one.
        harness.forget_problem_modules()
        _restore_global_state(defaults)
        if not harness.release_memory(device):
            return


def _validate(item: dict, job: dict, device: torch.device, tolerances, emit: Emit, control: Receiver) -> bool:
    """One reference's messages before its `done`; False when the server ended the job."""
    try:  # the estimate gets a copy of its own: what it leaves in module state stays there
        estimated, sets = (harness.load_problem_sets(item["reference_path"], item["input_sets"], int(job["seed"]))
                           for _ in range(2))
    except BaseException as exc:  # noqa: BLE001
        emit("load_error", error=harness.format_exception(exc))
        return True
    if not sizing.ask_for_memory([module for _, module in estimated], emit, control):
        return False
    del estimated
    timed_model = None
    for index, (name, module) in enumerate(sets):
        report, model = _check_set(module, job, device, tolerances)
        emit("set_report", name=name, report=report)
        if index == 0 and report["ok"]:
            timed_model = model
        else:
            del model
    if job["time"] and timed_model is not None and device.type == "cuda":
        from sandbox_service import timing

        emit("ready_to_time")
        if control.receive().get("type") != "time":
            return False
        seed = int(job["seed"])
        inputs = harness.trial_inputs(sets[0][1], harness.trial_seeds(seed, 1)[0], device)
        try:
            stats = timing.time_cuda(lambda: timed_model(*inputs), warmup=job["warmup_runs"],
                                     runs=job["timing_runs"], method=timing.CUDA_EVENTS)
            emit("timing", stats=stats.__dict__)
        except BaseException as exc:  # noqa: BLE001
            emit("timing_error", error=harness.format_exception(exc))
    return True
