"""Runs in the jailed candidate process: turn `ModelNew.forward` into a launch program.

The process has no CUDA (the jail does not even let it open the GPU) and never sees an input's values.
Forward runs once per input set on tensors that carry shape, stride and dtype only (torch's FakeTensor),
behind a facade that tells candidate code it is on `cuda:0`. Every PyTorch operator it runs on them is
recorded at the dispatcher, every Triton launch is recorded instead of run (with its grid worked out, its
heuristics and autotune alternatives resolved here, where the candidate's Python callbacks may run), and
its kernels' sources are collected with the globals they name. The result is the program of
sandbox_service/interface/program.py, which the trusted executor checks and replays.

Nothing here is trusted: the candidate can change any of it. What it cannot do is put values into the
executor's outputs other than through the program, whose every step the executor checks.
"""

from __future__ import annotations

import ast
import contextlib
import inspect
import re
import textwrap
import types
from typing import Any

import torch
from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

from sandbox_service.interface.program import Unsupported

CUDA = torch.device("cuda", 0)
_DEVICE_GETTER = torch._C.TensorBase.__dict__["device"]
_IS_CUDA_GETTER = torch._C.TensorBase.__dict__["is_cuda"]


def _host_device(device):
    """Where a fake tensor really lives (the CPU, as metadata only) for any device candidate code names."""
    if device is None:
        return None
    if isinstance(device, int):
        return torch.device("cpu")
    parsed = torch.device(device) if isinstance(device, str) else device
    return torch.device("cpu") if isinstance(parsed, torch.device) and parsed.type == "cuda" else device


class _CudaFacade(TorchFunctionMode):
    """Candidate code sees `cuda:0` tensors; underneath they are data-less CPU fakes."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = dict(kwargs or {})
        owner = getattr(func, "__self__", None)
        if owner is _DEVICE_GETTER:
            return CUDA
        if owner is _IS_CUDA_GETTER:
            return True
        if func is torch.Tensor.cuda:
            return args[0]
        if func is torch.Tensor.get_device:
            return 0
        if "device" in kwargs:
            kwargs["device"] = _host_device(kwargs["device"])
        if func in (torch.Tensor.to, torch.Tensor.new_empty, torch.Tensor.new_zeros, torch.Tensor.new_full,
                    torch.Tensor.new_ones, torch.Tensor.new_tensor):
            args = tuple(_host_device(a) if isinstance(a, (str, torch.device)) and str(a).startswith("cuda") else a
                         for a in args)
        return func(*args, **kwargs)


class _NoCuda:
    """torch.cuda as candidate code may use it while it is traced: one device, nothing to wait for."""

    def __init__(self, properties: dict):
        self.properties = types.SimpleNamespace(**properties)

    def install(self) -> None:
        cuda = torch.cuda
        cuda.is_available = lambda: True
        cuda.device_count = lambda: 1
        cuda.current_device = lambda: 0
        cuda.synchronize = lambda *a, **k: None
        cuda.get_device_properties = lambda *a, **k: self.properties
        cuda.get_device_name = lambda *a, **k: self.properties.name
        cuda.get_device_capability = lambda *a, **k: (self.properties.major, self.properties.minor)
        cuda.set_device = lambda *a, **k: None
        # Streams and events order work; the executor replays everything on one stream, in program order, and
        # times all of it. A value read from an event (elapsed time) does not exist here.
        cuda.Stream = _Stream
        cuda.current_stream = cuda.default_stream = lambda *a, **k: _Stream()
        cuda.stream = lambda *a, **k: contextlib.nullcontext()
        cuda.Event = _Event


class _Stream:
    def __init__(self, *args, **kwargs):
        pass

    def wait_stream(self, *args) -> None:
        pass

    def wait_event(self, *args) -> None:
        pass

    def synchronize(self) -> None:
        pass

    def record_event(self, event=None):
        return event or _Event()

    def query(self) -> bool:
        return True


class _Event:
    def __init__(self, *args, **kwargs):
        pass

    def record(self, *args) -> None:
        pass

    def wait(self, *args) -> None:
        pass

    def synchronize(self) -> None:
        pass

    def query(self) -> bool:
        return True

    def elapsed_time(self, *args) -> float:
        raise Unsupported("forward read an event's elapsed time: the launch interface has no clock")


# -- the program under construction ----------------------------------------------------------------
class _Refs:
    """Numbers for the tensors of one program (constants first, then one input set's tensors)."""

    def __init__(self):
        self.by_id: dict[int, int] = {}
        self.kept: list[torch.Tensor] = []  # keeps every numbered tensor alive, so ids are not reused
        self.next = 0

    def new(self, tensor: torch.Tensor) -> int:
        ref = self.next
        self.next += 1
        self.by_id[id(tensor)] = ref
        self.kept.append(tensor)
        return ref

    def get(self, tensor: torch.Tensor) -> int | None:
        return self.by_id.get(id(tensor))


def _meta(tensor: torch.Tensor) -> dict:
    return {"shape": list(tensor.shape), "stride": list(tensor.stride()), "dtype": str(tensor.dtype).removeprefix("torch.")}


class _Tracer:
    def __init__(self):
        self.mode = FakeTensorMode(allow_non_fake_inputs=True)
        self.refs = _Refs()
        self.constants: list[dict] = []  # {"ref", "meta"}
        self.constant_values: dict[str, torch.Tensor] = {}
        self.kernels: dict[str, dict] = {}
        self._kernel_names: dict[int, str] = {}
        self.steps: list[dict] | None = None  # the input set being traced
        self.set_constants: list[int] = []

    # -- constants ---------------------------------------------------------------------------
    def constant(self, real: torch.Tensor) -> torch.Tensor:
        """A fake standing for a tensor with values (a parameter, a buffer, a module-level tensor)."""
        if real.is_complex() or real.dtype not in _SAVEABLE:
            raise Unsupported(f"a tensor of dtype {real.dtype} in the model")
        fake = self.mode.from_tensor(real.detach())
        ref = self.refs.new(fake)
        self.refs.by_id[id(real)] = ref
        self.refs.kept.append(real)
        self.constants.append({"ref": ref, "meta": _meta(real)})
        self.constant_values[str(ref)] = real.detach().contiguous().clone()
        self.set_constants.append(ref)
        return fake

    def fake_model(self, model: torch.nn.Module) -> None:
        """Swap every tensor the model holds (parameters, buffers, tensor attributes) for a constant fake."""
        for module in model.modules():
            for table in (module._parameters, module._buffers):
                for name, value in list(table.items()):
                    if isinstance(value, torch.Tensor) and not isinstance(value, FakeTensor):
                        table[name] = self.constant(value)
            for name, value in list(vars(module).items()):
                if name.startswith("_"):
                    continue
                replaced = self._fake_value(value)
                if replaced is not value:
                    object.__setattr__(module, name, replaced)

    def _fake_value(self, value):
        if isinstance(value, torch.Tensor) and not isinstance(value, FakeTensor):
            return self.constant(value)
        if isinstance(value, (list, tuple)) and any(isinstance(v, torch.Tensor) for v in value):
            return type(value)(self._fake_value(v) for v in value)
        if isinstance(value, dict) and any(isinstance(v, torch.Tensor) for v in value.values()):
            return {k: self._fake_value(v) for k, v in value.items()}
        return value

    # -- encoding ----------------------------------------------------------------------------
    def encode(self, value) -> Any:
        if isinstance(value, torch.Tensor):
            ref = self.refs.get(value)
            if ref is not None:
                return {"ref": ref}
            if not isinstance(value, FakeTensor):
                if value.numel() <= 4096 and value.device.type == "cpu":
                    return {"literal": {"values": value.tolist(), "dtype": str(value.dtype).removeprefix("torch.")}}
                raise Unsupported("forward used a large tensor made outside the model and its inputs")
            raise Unsupported("forward used a tensor from another forward call or input set (kept between calls)")
        if isinstance(value, torch.dtype):
            return {"dtype": str(value).removeprefix("torch.")}
        if isinstance(value, torch.device):
            return {"device": True}
        if isinstance(value, torch.memory_format):
            return {"memory_format": str(value).removeprefix("torch.")}
        if isinstance(value, torch.layout):
            return {"layout": str(value).removeprefix("torch.")}
        if isinstance(value, (list, tuple, torch.Size)):
            return [self.encode(v) for v in value]
        if value is None or isinstance(value, (bool, int, float, str)):
            return value
        if isinstance(value, torch.SymInt):
            return int(value)
        raise Unsupported(f"a {type(value).__name__} passed to a torch operator or kernel")

    def encode_out(self, value) -> Any:
        if isinstance(value, torch.Tensor):
            ref = self.refs.get(value)
            return {"ref": ref if ref is not None else self.refs.new(value)}
        if isinstance(value, (list, tuple)):
            return [self.encode_out(v) for v in value]
        if value is None or isinstance(value, (bool, int, float)):
            return value
        raise Unsupported(f"a torch operator returned a {type(value).__name__}")

    # -- kernels -----------------------------------------------------------------------------
    def kernel(self, jitted) -> str:
        """The name a kernel has in the program; its source and globals are recorded once."""
        known = self._kernel_names.get(id(jitted))
        if known is not None:
            return known
        fn = getattr(jitted, "fn", None)
        if not callable(fn) or not hasattr(fn, "__code__"):
            raise Unsupported("a kernel that is not a @triton.jit function")
        if fn.__code__.co_freevars:
            raise Unsupported(f"kernel {fn.__name__} is defined inside a function (it closes over local names)")
        name = fn.__name__
        if name in self.kernels:
            raise Unsupported(f"two different kernels named {name}")
        self._kernel_names[id(jitted)] = name
        source = _function_source(fn)
        entry = {"source": source, "globals": {}}
        self.kernels[name] = entry
        for alias in sorted(_free_names(source)):
            if alias in fn.__globals__:
                entry["globals"][alias] = self._global(name, alias, fn.__globals__[alias])
        return name

    def _global(self, kernel: str, alias: str, value) -> dict:
        import triton.language as tl

        if isinstance(value, types.ModuleType):
            return {"module": value.__name__}
        if _is_jitted(value):
            return {"kernel": self.kernel(value)}
        if isinstance(value, tl.constexpr):
            held = value.value
            if held is None or isinstance(held, (bool, int, float, str)):
                return {"constexpr": held}
            if isinstance(held, tl.dtype):
                return {"dtype": held.name}
        if isinstance(value, tl.dtype):
            return {"dtype": value.name}
        if value is None or isinstance(value, (bool, int, float, str)):
            return {"value": value}
        raise Unsupported(f"kernel {kernel} uses the global {alias!r} (a {type(value).__name__}); a kernel may "
                          "name Triton's modules, other kernels and plain constants only")

    # -- launches ----------------------------------------------------------------------------
    def launch(self, outermost, args: tuple, kwargs: dict) -> None:
        if self.steps is None:
            raise Unsupported("a kernel launched outside forward (in __init__ or at import)")
        kwargs = {k: v for k, v in kwargs.items() if k not in ("grid", "warmup")}
        grid = kwargs.pop("_tracer_grid")
        reset, restore = [], []
        alternatives = []
        kernel = outermost
        configs = [None]
        if _is_autotuner(kernel):
            configs = list(kernel.configs)
            pruned = getattr(kernel, "early_config_prune", None)
            if pruned and len(configs) > 1:
                named = dict(zip(kernel.arg_names, args))
                configs = list(pruned(configs, named, **kwargs))
            reset = list(getattr(kernel, "reset_to_zero", None) or [])
            restore = list(getattr(kernel, "restore_value", None) or [])
            if getattr(kernel, "user_defined_pre_hook", False) or getattr(kernel, "user_defined_post_hook", False):
                raise Unsupported("an autotuner with a pre_hook or post_hook (Python run around each launch)")
            kernel = kernel.fn
        for config in configs:
            call_kwargs = dict(kwargs)
            options = {}
            if config is not None:
                if getattr(config, "pre_hook", None) is not None:
                    raise Unsupported("an autotune config with a pre_hook (Python run before each launch)")
                call_kwargs.update(config.kwargs)
                for key in ("num_warps", "num_stages", "num_ctas", "maxnreg"):
                    if getattr(config, key, None) is not None:
                        options[key] = getattr(config, key)
            inner = kernel
            while _is_heuristics(inner):
                named = {**dict(zip(inner.arg_names, args)), **call_kwargs}
                for key, rule in inner.values.items():
                    call_kwargs[key] = rule(named)
                    named[key] = call_kwargs[key]
                inner = inner.fn
            if not _is_jitted(inner):
                raise Unsupported(f"a launch through a {type(inner).__name__}")
            for key in list(call_kwargs):
                if key in ("num_warps", "num_stages", "num_ctas", "maxnreg", "enable_fp_fusion"):
                    options[key] = call_kwargs.pop(key)
            meta = {**dict(zip(_arg_names(inner), args)), **call_kwargs}
            resolved = grid(meta) if callable(grid) else grid
            if isinstance(resolved, int):
                resolved = (resolved,)
            alternatives.append({"grid": [int(g) for g in resolved], "kwargs": {k: self.encode(v) for k, v in call_kwargs.items()},
                                 "options": options})
            name = self.kernel(inner)
        step = {"launch": name, "args": [self.encode(a) for a in args], "configs": alternatives}
        if reset:
            step["reset_to_zero"] = reset
        if restore:
            step["restore_value"] = restore
        self.steps.append(step)


_SAVEABLE = {torch.float32, torch.float16, torch.bfloat16, torch.float64, torch.int64, torch.int32, torch.int16,
             torch.int8, torch.uint8, torch.bool}


def _is_jitted(value) -> bool:
    from triton.runtime.jit import JITFunction

    if isinstance(value, JITFunction):
        return True
    try:
        from triton.runtime.interpreter import InterpretedFunction
    except ImportError:
        return False
    return isinstance(value, InterpretedFunction)


def _is_autotuner(value) -> bool:
    from triton.runtime.autotuner import Autotuner

    return isinstance(value, Autotuner)


def _is_heuristics(value) -> bool:
    from triton.runtime.autotuner import Heuristics

    return isinstance(value, Heuristics)


def _arg_names(jitted) -> list[str]:
    names = getattr(jitted, "arg_names", None)
    if names is None:
        names = list(inspect.signature(jitted.fn).parameters)
    return list(names)


def _function_source(fn) -> str:
    """The kernel's `def` and body, decorators dropped (as Triton itself reads it)."""
    source = textwrap.dedent(inspect.getsource(fn))
    match = re.search(r"^def\s+\w+\s*\(", source, re.MULTILINE)
    if match is None:
        raise Unsupported(f"the source of kernel {fn.__name__} could not be read")
    return source[match.start():]


def _free_names(source: str) -> set[str]:
    """Names a function's body reads that it does not bind itself (its globals, builtins included)."""
    tree = ast.parse(source)
    bound, read = set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.arg):
            bound.add(node.arg)
        elif isinstance(node, ast.Name):
            (bound if isinstance(node.ctx, (ast.Store, ast.Del)) else read).add(node.id)
    return read - bound


# -- recording ----------------------------------------------------------------------------------
class _Recorder(TorchDispatchMode):
    """Every operator forward runs on tensors, in order, with what it made."""

    def __init__(self, tracer: _Tracer):
        super().__init__()
        self.tracer = tracer

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        from sandbox_service.verifier.runtime import _custom_op_body

        body = _custom_op_body(func)
        if body is not None:  # a custom op's body runs here: its operators and launches are what is recorded
            with self:
                return body(*args, **kwargs)
        encoded_args = self.tracer.encode(list(args))
        encoded_kwargs = {k: self.tracer.encode(v) for k, v in kwargs.items()}
        try:
            result = func(*args, **kwargs)
        except Exception as exc:
            if type(exc).__name__ in ("DataDependentOutputException", "DynamicOutputShapeException"):
                raise Unsupported(f"forward read tensor values on the host ({func}): the launch interface has "
                                  "no values to read") from None
            raise
        tensors = [t for t in _leaves(result) if isinstance(t, torch.Tensor)]
        if not tensors:
            return result  # a question about metadata (sizes, device), answered without values
        if self.tracer.steps is None:
            return result
        if func in _SAME_TENSOR and isinstance(args[0], torch.Tensor) and self.tracer.refs.get(args[0]) is not None:
            # Without autograd (the executor replays under no_grad) these are the tensor itself: no step. torch
            # issues a detach after every factory call made under a function mode (the facade).
            ref = self.tracer.refs.get(args[0])
            self.tracer.refs.by_id[id(result)] = ref
            self.tracer.refs.kept.append(result)
            return result
        self.tracer.steps.append({"op": str(func), "args": encoded_args, "kwargs": encoded_kwargs,
                                  "out": self.tracer.encode_out(result)})
        return result


_SAME_TENSOR = (torch.ops.aten.detach.default, torch.ops.aten.alias.default)


def _leaves(value):
    if isinstance(value, (list, tuple)):
        for item in value:
            yield from _leaves(item)
    else:
        yield value


@contextlib.contextmanager
def _launches_recorded(tracer: _Tracer):
    """Triton launches become program steps: `kernel[grid](...)` never compiles or runs here."""
    from triton.runtime.autotuner import Autotuner, Heuristics
    from triton.runtime.jit import KernelInterface

    original = KernelInterface.__getitem__

    def getitem(self, grid):
        return lambda *args, **kwargs: tracer.launch(self, args, {**kwargs, "_tracer_grid": grid})

    KernelInterface.__getitem__ = getitem
    patched = []
    for cls in (Autotuner, Heuristics):
        if "__getitem__" in vars(cls):
            patched.append((cls, vars(cls)["__getitem__"]))
            cls.__getitem__ = getitem
    try:
        yield
    finally:
        KernelInterface.__getitem__ = original
        for cls, method in patched:
            cls.__getitem__ = method


def trace(model_factory, make_inputs, sets: int) -> tuple[dict, dict[str, torch.Tensor]]:
    """The program of `model_factory(i)`'s forward on `make_inputs(i)` for each input set i, and its
    constants' values. `make_inputs(i)` runs under the fake mode: the inputs have shapes, never values."""
    tracer = _Tracer()
    traced = []
    for index in range(sets):
        tracer.set_constants = []
        model = model_factory(index)
        tracer.fake_model(model)
        try:
            with tracer.mode, _CudaFacade():
                inputs = make_inputs(index)
        except Exception as exc:  # noqa: BLE001 - a reference that reads its own values (a random scale...)
            if type(exc).__name__ not in ("DataDependentOutputException", "DynamicOutputShapeException"):
                raise
            with _CudaFacade():  # then with values, on the CPU: still not the trials' inputs (secret seeds)
                inputs = make_inputs(index)
        described, fakes = [], []
        for value in inputs:
            if isinstance(value, torch.Tensor):
                fake = value if isinstance(value, FakeTensor) else tracer.mode.from_tensor(value)
                described.append({"tensor": {"ref": tracer.refs.new(fake), "meta": _meta(fake)}})
                fakes.append(fake)
            else:
                described.append({"value": tracer.encode(value)})
                fakes.append(value)
        tracer.steps = []
        with torch.no_grad(), tracer.mode, _Recorder(tracer), _CudaFacade(), _launches_recorded(tracer):
            output = model(*fakes)
            outputs = tracer.encode(_flat_outputs(output))
        first, tracer.steps = tracer.steps, []
        with torch.no_grad(), tracer.mode, _Recorder(tracer), _CudaFacade(), _launches_recorded(tracer):
            model(*fakes)  # again: a forward whose work depends on earlier calls is caching results
        if _shape_of(tracer.steps) != _shape_of(first):
            raise StatefulForward(f"input set {index}: forward's second call ran other work than its first "
                                  f"({_shape_of(tracer.steps)} after {_shape_of(first)}): a result cache")
        tracer.steps = first
        traced.append({"inputs": described, "steps": tracer.steps, "outputs": outputs,
                       "constants": tracer.set_constants})
        tracer.steps = None
    program = {"kernels": tracer.kernels, "constants": tracer.constants, "sets": traced}
    return program, tracer.constant_values


class StatefulForward(Exception):
    """Forward did other work on a later call with the same inputs (a cache): the replay would hide it, so
    it is reported, as the in-process design reported `work-skipped-when-timed`."""


def _shape_of(steps: list[dict]) -> list[str]:
    return [step.get("op") or f"launch {step['launch']}" for step in steps]


def install_cuda_stand_ins(device_properties: dict) -> None:
    """torch.cuda as candidate code may use it here (before its import: module-level code may ask too)."""
    _NoCuda(device_properties).install()


def _flat_outputs(value) -> list:
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (list, tuple)):
        return [t for v in value for t in _flat_outputs(v)]
    if isinstance(value, (bool, int, float)):
        return [value]
    raise Unsupported(f"forward returned a {type(value).__name__}; expected tensors")


def cuda_facade() -> TorchFunctionMode:
    """For importing the candidate and constructing its model: `cuda` means the CPU, with real values
    (parameters are data the executor receives)."""
    return _CudaFacade()
