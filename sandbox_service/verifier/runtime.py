"""Layer 3, runtime: watch what `ModelNew.forward` really does, inside the candidate's child process.

- Triton launches are counted by wrapping the launchers (`JITFunction.run`, and `InterpretedFunction.run`
  under TRITON_INTERPRET=1) before the candidate is imported; each launch records its CUDA stream.
- Torch operators executed during forward are recorded at the dispatcher (a TorchDispatchMode), on the
  forward's thread and on every thread started after installation (`threads`). The only ones left out are
  the interpreter's own staging copies, told by their caller (`callers`): ops that candidate callbacks run
  while a launch is in progress (grid callables, hooks, heuristics, Python called from an interpreted kernel)
  are the candidate's. A CUDA launch issues no torch operators, so nothing is left out there.
- Guards that switch the dispatch recorder off and reads of tensor values into NumPy/Python are tripwires
  (`tripwires`); the recorder must also still be in place at every launch and when forward returns.
- Functions the evaluator relies on (comparison, timing, seeding, the launchers themselves) are
  snapshotted before the candidate is imported; any replacement is monkeypatching.
- After each forward: inputs must be unchanged, outputs must be plain tensors that do not alias the
  inputs, and a kernel launched on another stream must have finished with the current stream.

This is defence in depth: the verdict on outputs is computed in another process (the reference child), and the
static layer forbids the introspection needed to tamper with this monitor.
"""

from __future__ import annotations

import contextlib
import re
import time
from collections import Counter
from collections.abc import Iterator

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from sandbox_service.options import Policy
from sandbox_service.results import Violation
from sandbox_service.verifier import threads, tripwires
from sandbox_service.verifier.callers import interpreter_file, nearest_caller_file

LAYER = "runtime"

# Every rule this layer (and the evaluation around it) can report; docs/verifier_rules.md explains each.
RUNTIME_RULES = {
    "torch-compute-in-forward": "torch operators did work in forward (strict: anything but glue; relaxed: heavy or custom ops)",
    tripwires.MONITOR_DISABLED: "torch's dispatch was switched off or the op recorder removed during forward",
    tripwires.HOST_READ: "forward read tensor values into NumPy or Python (.numpy(), .tolist(), __array__, __dlpack__)",
    "no-kernel-launch": "a forward call launched no Triton kernel",
    "input-mutated": "forward changed an input in place",
    "output-aliases-input": "an output shares memory with an input",
    "output-tensor-subclass": "an output is a tensor subclass (work could hide in its methods)",
    "output-not-written": "an output was allocated uninitialised (NaN-poisoned) and no kernel wrote it",
    "output-ignores-inputs": "two trials with different inputs and expected answers got the same output",
    "unjoined-side-stream": "a kernel on another stream was still running after forward returned",
    "monkeypatch": "a function the evaluator relies on was replaced after the candidate was imported",
    "work-skipped-when-timed": "fewer kernel launches per call while timed than while checked (a result cache)",
    "inputs-tampered": "a trial's inputs, made after the candidate was imported, differ from the reference child's",
    "verdict-channel-tampering": "a message on the verdict channel without this evaluation's nonce, or garbage",
    "outputs-changed-after-handover": "the outputs the judge read differ from the ones forward returned",
    "malformed-handover": "a trial's outputs handed to the judge wrongly described (path, symlink, IPC handles, layout)",
    "malformed-build-request": "a launcher or ptxas request no honest Triton makes (the trusted builder refused it)",
    "illegal-kernel": "a kernel in the launch program that is not only Triton (it names Python beyond Triton's language)",
    "malformed-program": "a launch program no honest trace makes (the candidate tampered with its own process)",
}

# Aten operators that only allocate, view, move or re-lay out memory: glue, allowed in forward.
GLUE_OPS = frozenset(
    """
    empty empty_like empty_strided new_empty new_empty_strided zeros zeros_like new_zeros zero_ fill_ full
    full_like new_full ones ones_like new_ones arange lift_fresh lift_fresh_copy
    view view_as _unsafe_view reshape _reshape_alias as_strided t transpose permute expand expand_as unsqueeze
    squeeze flatten unflatten select slice narrow split split_with_sizes chunk unbind alias detach contiguous
    clone copy_ _to_copy to _copy_from _copy_from_and_resize set_ resize_ unfold movedim diagonal
    is_same_size size stride numel dim is_contiguous _has_compatible_shallow_copy_type
    record_stream _local_scalar_dense item equal
    """.split()
)
# Under the relaxed policy torch may do glue compute, but never the heavy lifting the kernel is for.
HEAVY_OPS = frozenset(
    """
    mm bmm addmm addbmm baddbmm matmul linear _linear mv addmv dot vdot einsum tensordot
    convolution _convolution conv1d conv2d conv3d conv_transpose1d conv_transpose2d conv_transpose3d
    cudnn_convolution cudnn_convolution_transpose mkldnn_convolution _convolution_mode
    _scaled_dot_product_attention _scaled_dot_product_flash_attention _scaled_dot_product_efficient_attention
    _scaled_dot_product_attention_math _scaled_dot_product_cudnn_attention scaled_dot_product_attention
    _native_multi_head_attention embedding_bag _embedding_bag cumsum cumprod softmax _softmax log_softmax _log_softmax
    native_layer_norm native_group_norm native_batch_norm _native_batch_norm_legit _native_batch_norm_legit_no_training
    cudnn_batch_norm max_pool2d_with_indices avg_pool2d avg_pool3d max_pool3d_with_indices adaptive_avg_pool2d
    _adaptive_avg_pool2d
    """.split()
)


# Under TRITON_INTERPRET=1 a launch copies its tensor arguments to host buffers and back with these.
INTERPRETER_STAGING_OPS = frozenset({"empty", "new_empty", "set_", "copy_"})


def _op_name(func) -> str:
    """The aten name (`mm`); other namespaces keep theirs (`mylib::clone`) so that no custom op reads as glue."""
    name = getattr(getattr(func, "overloadpacket", None), "__name__", None) or str(func)
    namespace = getattr(func, "namespace", "aten")
    return name.removeprefix("aten::") if namespace == "aten" else f"{namespace}::{name.split('::')[-1]}"


# Families of heavy operators by their names' parts: in-place (`addmm_`), fused (`_addmm_activation`),
# quantised (`_int_mm`) and backend (`_slow_conv2d_forward`, `thnn_conv2d`) variants of HEAVY_OPS are other
# operators with other names, and a list of names alone misses them (red team 5).
_HEAVY_FAMILIES = re.compile(
    r"mm(_|$)|matmul|multi_dot|mv(_|$)|dot$|einsum|tensordot|linear|conv|attention|softmax|norm(_|$)|pool"
    r"|cum|embedding_bag|fft|cdist|pdist|euclidean_dist|^dist$|linalg|cholesky|triangular_solve|svd|eig|qr$|matrix_exp|rnn|lstm|gru"
    r"|transformer|grid_sampler|bilinear"
)


def is_heavy(name: str) -> bool:
    """Heavy lifting a kernel is for: a HEAVY_OPS operator, or one of their families' variants."""
    base = name.strip("_")
    return name in HEAVY_OPS or base in HEAVY_OPS or bool(_HEAVY_FAMILIES.search(base))


def _is_forbidden(name: str, policy: Policy) -> bool:
    if policy == Policy.RELAXED:
        return is_heavy(name) or "::" in name  # a custom op whose body we cannot run may hide anything
    return name not in GLUE_OPS


def _custom_op_body(func):
    """The Python function behind a `torch.library.custom_op`/`triton_op` (None for aten and other ops)."""
    if getattr(func, "namespace", "aten") == "aten":
        return None
    from torch._library.custom_ops import OPDEFS

    return getattr(OPDEFS.get(func._schema.name), "_init_fn", None)


_UNINITIALISED_ALLOCATIONS = frozenset({"empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided"})


class _Recorder(TorchDispatchMode):
    """Counts operators, and fills fresh uninitialised float buffers with NaN.

    The forward's thread records while a forward runs; a thread the candidate started records always (its
    work could finish after forward returned, before the outputs are read). The NaN fill means an output
    that no kernel ever wrote is seen as such (all NaN), instead of whatever the allocator's memory held.
    """

    def __init__(self, monitor: RuntimeMonitor, always: bool = False):
        super().__init__()
        self.monitor = monitor
        self.always = always

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        body = _custom_op_body(func)
        if body is not None:  # run its body under the recorder: its operators and launches are judged, not its name
            with self:
                return body(*args, **(kwargs or {}))
        result = func(*args, **(kwargs or {}))
        name = _op_name(func)
        if (self.always or self.monitor.forward_open) and not self.monitor._is_interpreter_staging(name):
            self.monitor.ops[name] += 1
            if name in _UNINITIALISED_ALLOCATIONS and isinstance(result, torch.Tensor) and result.is_floating_point():
                result.fill_(float("nan"))
                self.monitor._poisoned.add(result.untyped_storage().data_ptr())
        return result


def _recorder_in_place() -> bool:
    """Whether this thread's dispatch reaches a recorder: the Python key is on and one is on the mode stack."""
    from torch.utils._python_dispatch import _get_current_dispatch_mode_stack

    if torch._C._dispatch_tls_is_dispatch_key_excluded(torch._C.DispatchKey.Python):
        return False
    return any(isinstance(mode, _Recorder) for mode in _get_current_dispatch_mode_stack())


def _launchers() -> list[type]:
    classes = []
    from triton.runtime import jit

    classes.append(jit.JITFunction)
    try:
        from triton.runtime import interpreter

        classes.append(interpreter.InterpretedFunction)
    except ImportError:
        pass
    return classes


def _watched_functions() -> dict[str, object]:
    """The objects whose identity must not change once candidate code has run."""
    import safetensors.torch

    from sandbox_service import timing
    from sandbox_service.worker import harness, protocol

    watched = {
        "torch.allclose": torch.allclose,
        "torch.equal": torch.equal,
        "torch.isclose": torch.isclose,
        "torch.manual_seed": torch.manual_seed,
        "torch.rand": torch.rand,
        "torch.randn": torch.randn,
        "torch.randint": torch.randint,
        "torch.cuda.synchronize": torch.cuda.synchronize,
        "torch.cuda.Event": torch.cuda.Event,
        "torch.cuda.Event.record": torch.cuda.Event.record,
        "torch.cuda.Event.elapsed_time": torch.cuda.Event.elapsed_time,
        "torch.nn.Module.__call__": torch.nn.Module.__call__,
        "torch.nn.Module._call_impl": torch.nn.Module._call_impl,
        "torch.nn.Module.to": torch.nn.Module.to,
        "torch.Tensor.clone": torch.Tensor.clone,
        "torch.Tensor.to": torch.Tensor.to,
        "torch.Tensor.cpu": torch.Tensor.cpu,
        "torch.Tensor.detach": torch.Tensor.detach,
        "torch.Tensor.contiguous": torch.Tensor.contiguous,
        "torch.Tensor.__eq__": torch.Tensor.__eq__,
        "torch.Tensor.data_ptr": torch.Tensor.data_ptr,
        "time.perf_counter": time.perf_counter,
        "safetensors.torch.save_file": safetensors.torch.save_file,
        "timing.time_cuda": timing.time_cuda,
        "protocol.send": protocol.send,
    }
    # what the batched input checks and fingerprints call after the candidate ran
    for name in ("cat", "stack", "isnan"):
        watched[f"torch.{name}"] = getattr(torch, name)
    for name in ("__ne__", "any", "all", "masked_fill", "tolist", "reshape", "numpy"):
        watched[f"torch.Tensor.{name}"] = getattr(torch.Tensor, name)
    for name in ("clone", "flatten_outputs", "save_outputs", "synchronize", "seed_everything", "to_device",
                 "fingerprint", "fingerprint_parts", "finish_fingerprints", "finish_fingerprint_grid"):
        watched[f"harness.{name}"] = getattr(harness, name)
    for cls in _launchers():
        watched[f"{cls.__module__}.{cls.__name__}.run"] = cls.run
    watched.update(threads.thread_starters())
    return watched


_CHUNK = 1 << 24  # elements compared at a time: bounded temporaries for multi-GB inputs


def _differs(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor | bool:
    """Whether two tensors differ in shape, dtype or any value (NaN equals NaN). Values are compared on
    their device and the answer is a 0-d tensor there, so that all of a trial's checks cost one copy to the
    host (`_any_true`) instead of several synchronisations each."""
    if a.shape != b.shape or a.dtype != b.dtype or a.device != b.device:
        return True
    if a.numel() == 0:
        return False
    if not (a.is_floating_point() or a.is_complex()):
        return (a != b).any()
    a, b = a.reshape(-1), b.reshape(-1)
    differs = torch.zeros((), dtype=torch.bool, device=a.device)
    for start in range(0, a.numel(), _CHUNK):
        x, y = a[start : start + _CHUNK], b[start : start + _CHUNK]
        nan_x, nan_y = torch.isnan(x), torch.isnan(y)
        differs |= (nan_x != nan_y).any() | (x.masked_fill(nan_x, 0) != y.masked_fill(nan_y, 0)).any()
    return differs


def _any_true(flags: list[torch.Tensor | bool]) -> list[bool]:
    """The flags as booleans, with one host copy per device."""
    answers: dict[int, bool] = {i: f for i, f in enumerate(flags) if isinstance(f, bool)}
    by_device: dict[torch.device, list[int]] = {}
    for i, flag in enumerate(flags):
        if not isinstance(flag, bool):
            by_device.setdefault(flag.device, []).append(i)
    for indices in by_device.values():
        for i, value in zip(indices, torch.stack([flags[i].reshape(()) for i in indices]).tolist()):
            answers[i] = bool(value)
    return [answers[i] for i in range(len(flags))]


class RuntimeMonitor:
    """Install once, before the candidate is imported; then wrap each forward in `forward_scope()`."""

    def __init__(self, device: torch.device):
        self.device = device
        self.launches = 0
        self.side_stream_launches = 0
        self.launches_per_forward: list[int] = []
        self.ops: Counter[str] = Counter()
        self.host_reads: Counter[str] = Counter()
        self.findings: list[Violation] = []
        self.forward_open = False
        # only the interpreter stages memory with torch operators; on CUDA nothing is exempt
        self._staging_file = interpreter_file() if device.type == "cpu" else None
        self._forward_stream: int | None = None
        self._side_streams: dict[int, object] = {}
        self._watched: dict[str, object] = {}
        self._poisoned: set[int] = set()

    # -- installation --------------------------------------------------------------------------
    def install(self) -> None:
        import torch._dynamo  # noqa: F401 - its import rebinds torch.manual_seed; load it before the snapshot

        for cls in _launchers():
            cls.run = self._wrap_launcher(cls.run)
        threads.record_new_threads(lambda: _Recorder(self, always=True))
        tripwires.install(self._tripped)
        self._watched = _watched_functions()

    def _tripped(self, rule: str, name: str) -> None:
        if not self.forward_open:
            return
        if rule == tripwires.HOST_READ:
            self.host_reads[name] += 1
        else:
            self._add(rule, f"{name} was called during forward (with it torch operators can run unseen)")

    def _is_interpreter_staging(self, name: str) -> bool:
        """An operator the interpreter's launch itself issued to copy arguments (not the candidate's)."""
        return (
            self._staging_file is not None
            and name in INTERPRETER_STAGING_OPS
            and nearest_caller_file() == self._staging_file
        )

    def _check_recorder_in_place(self, where: str) -> None:
        if self.forward_open and not _recorder_in_place():
            self._add(tripwires.MONITOR_DISABLED, f"the op recorder was not in place {where}")

    def _wrap_launcher(self, original):
        monitor = self

        def run(launcher, *args, **kwargs):
            if kwargs.get("warmup"):
                return original(launcher, *args, **kwargs)
            monitor.launches += 1
            monitor._check_recorder_in_place("at a kernel launch")
            if monitor.device.type == "cuda" and monitor._forward_stream is not None:
                stream = torch.cuda.current_stream()
                if stream.cuda_stream != monitor._forward_stream:
                    monitor.side_stream_launches += 1
                    monitor._side_streams[stream.cuda_stream] = stream
            return original(launcher, *args, **kwargs)

        run.__wrapped__ = original
        return run

    # -- observation ---------------------------------------------------------------------------
    @contextlib.contextmanager
    def forward_scope(self) -> Iterator[None]:
        """Count launches (and record torch ops) for one forward call."""
        before = self.launches
        if self.device.type == "cuda":
            self._forward_stream = torch.cuda.current_stream().cuda_stream
        try:
            with _Recorder(self):
                self.forward_open = True
                try:
                    yield
                finally:
                    self._check_recorder_in_place("when forward returned")
                    self.forward_open = False
        finally:
            self.launches_per_forward.append(self.launches - before)
            self._check_side_streams_joined()
            self._forward_stream = None

    def _check_side_streams_joined(self) -> None:
        if not self._side_streams:
            return
        torch.cuda.current_stream().synchronize()
        for stream in self._side_streams.values():
            if not stream.query():
                self._add("unjoined-side-stream", "a kernel on another stream was still running after forward returned")
        self._side_streams.clear()

    def check_after_forward(self, pristine_inputs: list, used_inputs: list, outputs: list[torch.Tensor]) -> None:
        pending: list[tuple[str, str]] = []  # (rule, message) found when the matching flag is true
        flags: list[torch.Tensor | bool] = []
        for index, (before, after) in enumerate(zip(pristine_inputs, used_inputs)):
            if isinstance(before, torch.Tensor):
                pending.append(("input-mutated", f"forward modified input {index} in place"))
                flags.append(_differs(before, after))
        input_storages = {
            t.untyped_storage().data_ptr() for t in used_inputs if isinstance(t, torch.Tensor) and t.numel() > 0
        }
        for index, out in enumerate(outputs):
            if type(out) not in (torch.Tensor, torch.nn.Parameter):
                self._add("output-tensor-subclass", f"output {index} is a {type(out).__name__}, not a plain tensor")
            elif out.numel() > 0 and out.untyped_storage().data_ptr() in input_storages:
                self._add("output-aliases-input", f"output {index} shares memory with an input")
            elif out.numel() > 0 and out.untyped_storage().data_ptr() in self._poisoned:
                pending.append(("output-not-written", f"output {index} was allocated uninitialised and no kernel wrote it"))
                flags.append(torch.isnan(out).all())
        self._poisoned.clear()
        for (rule, message), found in zip(pending, _any_true(flags)):
            if found:
                self._add(rule, message)

    def check_untampered(self) -> None:
        current = _watched_functions()
        for name, original in self._watched.items():
            if current.get(name) is not original:
                self._add("monkeypatch", f"{name} was replaced after the candidate was imported")

    def _add(self, rule: str, message: str) -> None:
        if rule not in RUNTIME_RULES:
            raise KeyError(f"unknown runtime rule {rule!r}")
        violation = Violation(LAYER, rule, message)
        if violation not in self.findings:
            self.findings.append(violation)

    # -- verdict inputs ------------------------------------------------------------------------
    def violations(self, policy: Policy) -> list[Violation]:
        found = list(self.findings)
        if self.launches_per_forward and min(self.launches_per_forward) == 0:
            found.append(Violation(LAYER, "no-kernel-launch", RUNTIME_RULES["no-kernel-launch"]))
        bad = sorted(name for name in self.ops if _is_forbidden(name, policy))
        if bad:
            found.append(
                Violation(LAYER, "torch-compute-in-forward", "torch operators ran outside Triton kernels: " + ", ".join(bad))
            )
        if self.host_reads and policy == Policy.STRICT:
            found.append(Violation(LAYER, tripwires.HOST_READ, "forward read tensor values on the host through "
                                   + ", ".join(sorted(self.host_reads))))
        return found
