"""Trusted: run one input set's program on real tensors. The only code that runs is PyTorch operators the
policy allows (allocation, views, copies; under `relaxed` also light compute) and the program's kernels,
checked by kernels.py. Outputs therefore hold what those kernels and operators made from the inputs and
the model's constants, and nothing else.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import torch

from sandbox_service.interface.program import ProgramError, Unsupported, refs_in
from sandbox_service.options import Policy
from sandbox_service.verifier.runtime import GLUE_OPS, _UNINITIALISED_ALLOCATIONS, _is_forbidden, _op_name

# Never replayed, whatever the policy: values to the host, storage surgery, streams.
NEVER = frozenset({"_local_scalar_dense", "item", "equal", "set_", "record_stream", "resize_", "_copy_from",
                   "_copy_from_and_resize", "is_same_size", "_has_compatible_shallow_copy_type", "lift_fresh",
                   "lift_fresh_copy"})
_DTYPES = {str(d).removeprefix("torch."): d for d in vars(torch).values() if isinstance(d, torch.dtype)}
_FORMATS = {name: getattr(torch, name) for name in ("contiguous_format", "channels_last", "channels_last_3d",
                                                     "preserve_format")}


@dataclasses.dataclass
class Verdicts:
    """What the replay found about the program itself (trusted findings: the executor computed them)."""

    forbidden_ops: list[str]
    launches: int


def _operator(name: str):
    namespace, op, overload = name.split(".")
    if namespace != "aten":
        raise ProgramError(f"operator {name}: only aten operators are replayed (a custom op's body is recorded)")
    packet = getattr(torch.ops.aten, op, None)
    overload_fn = getattr(packet, overload, None) if packet is not None else None
    if not isinstance(overload_fn, torch._ops.OpOverload):
        raise ProgramError(f"no operator {name}")
    return overload_fn


def _takes_tensors(kind) -> bool:
    """Whether an argument of this schema type holds tensors (Tensor, Tensor?, Tensor[], Tensor?[]): anywhere
    else a tensor would be read to the host by torch's argument parser (an int size, a Scalar)."""
    while isinstance(kind, (torch._C.OptionalType, torch._C.ListType)):
        kind = kind.getElementType()
    return isinstance(kind, torch._C.TensorType)


def _check_tensor_positions(fn, name: str, step: dict) -> None:
    """A program's tensors go only where the operator takes tensors: a tensor handed to an int or Scalar argument
    is its value read to the host (a size a kernel chose, trial by trial: red team 10), which the interface
    never does. An honest trace records no such thing (the tracer has no values to read)."""
    schema = getattr(fn, "_schema", None)
    if schema is None:
        return
    positional = [a for a in schema.arguments if not a.kwarg_only]
    by_name = {a.name: a for a in schema.arguments}
    for index, value in enumerate(step["args"]):
        if refs_in(value) and (index >= len(positional) or not _takes_tensors(positional[index].type)):
            raise ProgramError(f"operator {name}: a tensor where argument {index} takes no tensor")
    for key, value in step["kwargs"].items():
        if refs_in(value) and (key not in by_name or not _takes_tensors(by_name[key].type)):
            raise ProgramError(f"operator {name}: a tensor where argument {key!r} takes no tensor")


def dtype(name: str) -> torch.dtype:
    if name not in _DTYPES:
        raise ProgramError(f"no dtype {name!r}")
    return _DTYPES[name]


def _tensors_in(result) -> list[torch.Tensor]:
    """The tensors an operator returned: itself, or those of a list or tuple."""
    items = (result,) if isinstance(result, torch.Tensor) else result if isinstance(result, (list, tuple)) else ()
    return [t for t in items if isinstance(t, torch.Tensor)]


class Replay:
    """One input set's program, ready to run on that set's inputs."""

    def __init__(self, program_set: dict, kernels, constants: dict[int, torch.Tensor], device: torch.device,
                 policy: Policy):
        self.steps = []
        self.device = device
        self.kernels = kernels
        self.constants = constants
        self.inputs = program_set["inputs"]
        self.outputs = program_set["outputs"]
        self.policy = policy
        # Under the relaxed policy, of the last run: the largest result a compute operator (not glue) made, its
        # name, and the elements all of them made (runner.oversized_compute compares both with the forward's
        # inputs and outputs).
        self.largest_compute: tuple[int, str] = (0, "")
        self.compute_elements = 0
        forbidden = []
        launches = 0
        for step in program_set["steps"]:
            if "op" in step:
                op = _operator(step["op"])
                name = _op_name(op)
                if name in NEVER or _is_forbidden(name, policy):
                    forbidden.append(name)
                self.steps.append(("op", op, name, step))
            else:
                kernel = getattr(kernels, step["launch"], None)
                if kernel is None:
                    raise ProgramError(f"kernel {step['launch']} is not in the program's module")
                self.steps.append(("launch", kernel, step["launch"], step))
                launches += 1
        self.verdicts = Verdicts(sorted(set(forbidden)), launches)
        self.chosen: dict[int, int] = {}  # step index -> autotune configuration chosen
        self.poisoned: set[int] = set()
        self._compile()

    # -- inputs --------------------------------------------------------------------------------
    def check_inputs(self, inputs: list) -> None:
        """The real inputs must be what the program was traced with (shapes, strides, dtypes, values of
        non-tensors); Unsupported if they are not: forward would have been traced on something else."""
        if len(inputs) != len(self.inputs):
            raise Unsupported(f"the program was traced with {len(self.inputs)} inputs; get_inputs() made {len(inputs)}")
        for index, (value, traced) in enumerate(zip(inputs, self.inputs)):
            if "tensor" in traced:
                meta = traced["tensor"]["meta"]
                if not isinstance(value, torch.Tensor) or list(value.shape) != meta["shape"] or (
                        list(value.stride()) != meta["stride"] and value.numel() > 1) or value.dtype != dtype(meta["dtype"]):
                    raise Unsupported(f"input {index} differs from the one forward was traced with")
            elif isinstance(value, torch.Tensor) or self._decode(traced["value"], {}) != value:
                raise Unsupported(f"input {index} (not a tensor) has another value in this trial than when traced; "
                                  "the launch interface fixes non-tensor inputs when it traces forward")

    # -- running -------------------------------------------------------------------------------
    def run(self, inputs: list, poison: bool = False) -> list:
        env: dict[int, Any] = dict(self.constants)
        for value, traced in zip(inputs, self.inputs):
            if "tensor" in traced:
                env[traced["tensor"]["ref"]] = value
        self.poisoned = set()
        self.largest_compute, self.compute_elements = (0, ""), 0
        for step in self._compiled:
            step(env, poison)
        return [o if isinstance(o, torch.Tensor) else torch.tensor(o, device=self.device) for o in self._outputs(env)]

    def _compile(self) -> None:
        """Each step once into a closure: arguments without tensors are decoded here, never per run (a replay
        of a forward costs what the forward's own Python would, not a walk of JSON trees per call)."""
        self._compiled = []
        for index, (kind, fn, name, step) in enumerate(self.steps):
            if kind == "op":
                self._compiled.append(self._op_step(fn, name, step))
            else:
                self._compiled.append(self._launch_step(index, fn, step))
        self._outputs = self._compiler(self.outputs)

    def _op_step(self, fn, name: str, step: dict):
        _check_tensor_positions(fn, name, step)
        args, kwargs = self._compiler(step["args"]), self._compiler_kwargs(step["kwargs"])
        bind, allocates = step["out"], name in _UNINITIALISED_ALLOCATIONS
        call = getattr(fn, "_op", fn)  # the operator itself, without OpOverload.__call__'s frame
        measured = self.policy == Policy.RELAXED and name not in GLUE_OPS

        def run(env: dict, poison: bool) -> None:
            result = call(*args(env), **kwargs(env))
            if measured:
                for made in _tensors_in(result):
                    self.compute_elements += made.numel()
                    if made.numel() > self.largest_compute[0]:
                        self.largest_compute = (made.numel(), name)
            if isinstance(bind, dict) and type(result) is torch.Tensor:
                env.setdefault(bind["ref"], result)  # one tensor (an in-place operator's is already bound)
            else:
                self._bind(bind, result, env)
            if poison and allocates and isinstance(result, torch.Tensor) and result.is_floating_point():
                result.fill_(float("nan"))
                self.poisoned.add(result.untyped_storage().data_ptr())

        return run

    def _launch_step(self, index: int, kernel, step: dict):
        args = self._compiler(step["args"])
        # Per configuration, the keyword arguments of Triton's launch (grid, constexprs, options) in one
        # function of the run's tensors: a dict made once when none of them is a tensor.
        configs = [self._compiler_kwargs({**c["kwargs"], **c["options"]}, grid=tuple(c["grid"]), warmup=False)
                   for c in step["configs"]]
        launch = kernel.run
        single = configs[0] if len(configs) == 1 else None

        def run(env: dict, poison: bool) -> None:
            values = args(env)
            if single is not None:
                launch(*values, **single(env))
                return
            choice = self.chosen.get(index)
            if choice is None:
                choice = self._autotune(kernel, step, values, env)
                self.chosen[index] = choice
            launch(*values, **configs[choice](env))

        return run

    def _compiler_kwargs(self, tree: dict, **fixed):
        """Keyword arguments: `fixed` ones are plain values already; a dict of constants is built once."""
        static = {n: self._decode(v, {}) for n, v in tree.items() if not refs_in(v)}
        dynamic = [(n, self._compiler(v)) for n, v in tree.items() if refs_in(v)]
        if not dynamic:
            static.update(fixed)
            return lambda env: static
        return lambda env: {**static, **{n: part(env) for n, part in dynamic}, **fixed}

    def _compiler(self, tree):
        """A function of the run's tensors that makes `tree`'s value (constants decoded once). A list is a
        template of its constants with the run's tensors put in their places: one copy per call."""
        if isinstance(tree, list):
            template = [None if refs_in(t) else self._decode(t, {}) for t in tree]
            slots = [(i, t["ref"]) for i, t in enumerate(tree) if isinstance(t, dict) and "ref" in t]
            nested = [(i, self._compiler(t)) for i, t in enumerate(tree)
                      if refs_in(t) and not (isinstance(t, dict) and "ref" in t)]

            def build(env):
                value = list(template)
                for i, ref in slots:
                    value[i] = env[ref]
                for i, part in nested:
                    value[i] = part(env)
                return value
            return build
        if isinstance(tree, dict) and "ref" in tree:
            ref = tree["ref"]
            return lambda env: env[ref]
        value = self._decode(tree, {})
        return lambda env: value

    def _autotune(self, kernel, step: dict, args: list, env: dict) -> int:
        """The fastest configuration, timed here (Triton's autotuner would run the candidate's hooks)."""
        if self.device.type != "cuda":
            return 0
        names = list(getattr(kernel, "arg_names", []))
        reset = [args[names.index(n)] for n in step.get("reset_to_zero", []) if n in names]
        restore = [args[names.index(n)] for n in step.get("restore_value", []) if n in names]
        saved = [t.clone() for t in restore]
        best, best_ms = 0, float("inf")
        for choice, config in enumerate(step["configs"]):
            kwargs = {k: self._decode(v, env) for k, v in config["kwargs"].items()}
            times = []
            try:
                for _ in range(4):
                    for t in reset:
                        t.zero_()
                    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                    start.record()
                    kernel[tuple(config["grid"])](*args, **kwargs, **config["options"])
                    end.record()
                    end.synchronize()
                    times.append(start.elapsed_time(end))
            except Exception as exc:  # noqa: BLE001 - a config that does not compile (resources) is skipped
                if type(exc).__name__ != "OutOfResources":
                    raise
                continue
            if min(times[1:]) < best_ms:
                best, best_ms = choice, min(times[1:])
        for t, value in zip(restore, saved):
            t.copy_(value)
        for t in reset:
            t.zero_()
        return best

    # -- values --------------------------------------------------------------------------------
    def _decode(self, tree, env: dict):
        if isinstance(tree, list):
            return [self._decode(v, env) for v in tree]
        if isinstance(tree, dict):
            tag, value = next(iter(tree.items()))
            if tag == "ref":
                return env[value]
            if tag == "dtype":
                return dtype(value)
            if tag == "device":
                return self.device
            if tag == "memory_format":
                if value not in _FORMATS:
                    raise ProgramError(f"no memory format {value!r}")
                return _FORMATS[value]
            if tag == "layout":
                if value != "strided":
                    raise ProgramError(f"layout {value!r}: only strided tensors")
                return torch.strided
            if tag == "literal":
                return torch.tensor(value["values"], dtype=dtype(value["dtype"]), device=self.device)
        return tree

    @staticmethod
    def _bind(tree, value, env: dict) -> None:
        if isinstance(tree, list):
            if not isinstance(value, (list, tuple)) or len(value) != len(tree):
                raise ProgramError("an operator's results do not match the program")
            for t, v in zip(tree, value):
                Replay._bind(t, v, env)
        elif isinstance(tree, dict):
            if not isinstance(value, torch.Tensor):
                raise ProgramError("an operator's results do not match the program")
            env.setdefault(tree["ref"], value)  # an in-place operator returns a tensor the program already has


def output_refs(program_set: dict) -> list[int]:
    return refs_in(program_set["outputs"])
