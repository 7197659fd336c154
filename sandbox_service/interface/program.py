"""The launch program: the narrow interface between a jailed candidate and the trusted executor.

A candidate's Python never holds the GPU or the inputs' values. It runs `ModelNew.forward` once per input
set on tensors without data (sandbox_service/untrusted/tracer.py), and what forward did becomes a program:
the Triton kernels it launched (their source and the globals they name), the PyTorch operators it ran on
tensors (allocations, views, copies), and which tensors it returned. The executor
(sandbox_service/executor/) checks the program here and replays it on the real inputs; outputs can come
only from what the program says, so work done anywhere else never reaches them.

Everything is plain JSON: a tensor is `{"ref": N}`; constants (the model's parameters and buffers, made
in `__init__`) are data in a safetensors file beside the program, named by their ref. This module is the
trusted reading of a program: `check_program` refuses anything malformed or beyond the bounds below,
with a message the candidate's verdict carries.
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import importlib
import math
import re

from sandbox_service import ast_parse

# What one program may hold: beyond this it is not a kernel's forward.
MAX_KERNELS = 64
MAX_STEPS = 4096  # per input set
MAX_REFS = 65536
MAX_CONSTANTS = 4096
MAX_SOURCE_CHARS = 200_000  # per kernel
MAX_TREE_NODES = 4096  # per step's arguments
MAX_CONFIGS = 64  # autotune alternatives per launch
LAUNCH_OPTIONS = frozenset({"num_warps", "num_stages", "num_ctas", "maxnreg", "enable_fp_fusion"})
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_OP_NAME = re.compile(r"aten\.[A-Za-z_][A-Za-z0-9_]*\.[A-Za-z_][A-Za-z0-9_]*")
# Non-tensor leaves an argument may hold besides numbers, strings, booleans and None.
TAGS = ("ref", "dtype", "device", "memory_format", "layout", "literal")


class ProgramError(ValueError):
    """A program no honest tracer produces (the candidate tampered with its own process)."""


class Unsupported(Exception):
    """Something forward does that the launch interface cannot express (a value read back to the host, a
    kernel calling plain Python). The candidate's verdict says so: it is not a cheat, and not ok."""


@dataclasses.dataclass(frozen=True)
class ProgramStats:
    kernels: int
    steps: int
    launches: int
    constants: int


def _ident(value, what: str) -> str:
    if not isinstance(value, str) or not _IDENTIFIER.fullmatch(value) or len(value) > 200:
        raise ProgramError(f"{what} is not an identifier: {str(value)[:80]!r}")
    return value


def _walk(tree, refs: set[int], budget: list[int], what: str, defined: set[int] | None = None) -> None:
    """Check an argument tree: every leaf plain, every tensor a ref already defined (or, with `defined`
    None, any ref: an output tree, whose refs are collected into `refs`)."""
    budget[0] -= 1
    if budget[0] < 0:
        raise ProgramError(f"{what}: more than {MAX_TREE_NODES} values")
    if tree is None or isinstance(tree, (bool, str)):
        if isinstance(tree, str) and len(tree) > 1000:
            raise ProgramError(f"{what}: a string of {len(tree)} characters")
        return
    if isinstance(tree, int):
        if abs(tree) > 1 << 63:
            raise ProgramError(f"{what}: an integer out of range")
        return
    if isinstance(tree, float):
        return
    if isinstance(tree, list):
        for item in tree:
            _walk(item, refs, budget, what, defined)
        return
    if isinstance(tree, dict):
        if len(tree) != 1 or next(iter(tree)) not in TAGS:
            raise ProgramError(f"{what}: an object that is no tagged value: {sorted(tree)[:4]}")
        tag, value = next(iter(tree.items()))
        if tag == "ref":
            if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value < MAX_REFS:
                raise ProgramError(f"{what}: a bad tensor reference {value!r}")
            if defined is None:
                if value in refs:
                    raise ProgramError(f"{what}: tensor {value} defined twice")
                refs.add(value)
            elif value not in defined:
                raise ProgramError(f"{what}: tensor {value} is used before anything made it (computed outside "
                                   "what the program records)")
        elif tag == "literal":
            if not isinstance(value, dict) or set(value) != {"values", "dtype"}:
                raise ProgramError(f"{what}: a malformed literal tensor")
            _ident(value["dtype"], f"{what}: literal dtype")
            _walk(value["values"], refs, budget, what, defined)
        elif tag == "device":
            if value is not True:
                raise ProgramError(f"{what}: a device other than the executor's")
        else:
            _ident(value, f"{what}: {tag}")
        return
    raise ProgramError(f"{what}: a value of type {type(tree).__name__}")


def _tensor_meta(meta, what: str) -> None:
    if not isinstance(meta, dict) or set(meta) != {"shape", "stride", "dtype"}:
        raise ProgramError(f"{what}: a malformed tensor description")
    for key in ("shape", "stride"):
        if not isinstance(meta[key], list) or len(meta[key]) > 16 or not all(
                isinstance(d, int) and not isinstance(d, bool) and 0 <= d < 1 << 48 for d in meta[key]):
            raise ProgramError(f"{what}: a bad {key}")
    if len(meta["shape"]) != len(meta["stride"]):
        raise ProgramError(f"{what}: shape and stride differ in length")
    _ident(meta["dtype"], f"{what}: dtype")


def _grid(grid, what: str) -> None:
    if not isinstance(grid, list) or not 1 <= len(grid) <= 3 or not all(
            isinstance(g, int) and not isinstance(g, bool) and 0 <= g < 1 << 31 for g in grid):
        raise ProgramError(f"{what}: the grid must be 1 to 3 non-negative integers, not {str(grid)[:80]}")
    if math.prod(grid) > 1 << 34:
        raise ProgramError(f"{what}: a grid of {math.prod(grid)} programs")


def _launch(step: dict, kernels: dict, defined: set[int], what: str) -> None:
    if not isinstance(step["launch"], str) or step["launch"] not in kernels:
        raise ProgramError(f"{what}: launches an unknown kernel {str(step['launch'])[:80]!r}")
    budget = [MAX_TREE_NODES]
    _walk(step["args"], set(), budget, what, defined)
    if not isinstance(step["args"], list):
        raise ProgramError(f"{what}: launch arguments must be a list")
    configs = step["configs"]
    if not isinstance(configs, list) or not 1 <= len(configs) <= MAX_CONFIGS:
        raise ProgramError(f"{what}: 1 to {MAX_CONFIGS} launch configurations")
    for config in configs:
        if not isinstance(config, dict) or set(config) != {"grid", "kwargs", "options"}:
            raise ProgramError(f"{what}: a malformed launch configuration")
        _grid(config["grid"], what)
        if not isinstance(config["kwargs"], dict) or not isinstance(config["options"], dict):
            raise ProgramError(f"{what}: keyword arguments must be objects")
        parameters = kernel_parameters(kernels[step["launch"]]["source"])
        if len(step["args"]) > len(parameters):
            raise ProgramError(f"{what}: {len(step['args'])} arguments for a kernel of {len(parameters)} parameters")
        for name, value in config["kwargs"].items():
            _ident(name, f"{what}: argument name")
            # Only the kernel's own parameters: Triton's launch takes its compile options as keywords too
            # (ir_override, extern_libs, debug ...), which would compile something other than the checked kernel.
            if name not in parameters[len(step["args"]):] or name in triton_option_names():
                raise ProgramError(f"{what}: argument {name} is not a parameter of kernel {step['launch']} "
                                   "left after its positional arguments")
            _walk(value, set(), budget, what, defined)
        for name, value in config["options"].items():
            if name not in LAUNCH_OPTIONS:
                raise ProgramError(f"{what}: launch option {str(name)[:40]!r} is not one honest Triton takes here")
            if not isinstance(value, (int, bool)) and value is not None:
                raise ProgramError(f"{what}: launch option {name} must be an integer")
    for key in ("reset_to_zero", "restore_value"):
        names = step.get(key, [])
        if not isinstance(names, list) or len(names) > 64:
            raise ProgramError(f"{what}: {key} must be a list of argument names")
        for name in names:
            _ident(name, f"{what}: {key}")


# Keywords Triton's launch takes for itself on any version (the backends' compile options are added from the
# installed Triton by triton_option_names): JITFunction.run hands every keyword of a launch, the kernel's own
# parameters' included, to backend.parse_options, so a parameter with such a name would set a compile option.
_TRITON_KEYWORDS = LAUNCH_OPTIONS | frozenset({
    "grid", "warmup", "cluster_dims", "ptx_version", "ptx_options",
    "ir_override", "launch_cooperative_grid", "launch_pdl", "supported_fp8_dtypes",
    "deprecated_fp8_dot_operand_dtypes", "default_dot_input_precision", "allowed_dot_input_precisions",
    "max_num_imprecise_acc_default", "extern_libs", "debug", "backend_name", "sanitize_overflow", "arch",
    "instrumentation_mode", "warp_size", "matrix_instr_nonkdim", "kpack", "waves_per_eu", "schedule_hint",
})


@functools.cache
def triton_option_names() -> frozenset[str]:
    """Every keyword Triton's launch would take as its own: the fixed list above and every field of the
    installed backends' option classes."""
    names = set(_TRITON_KEYWORDS)
    for module, cls in (("triton.backends.nvidia.compiler", "CUDAOptions"), ("triton.backends.amd.compiler", "HIPOptions"),
                        ("triton.runtime.interpreter", "InterpreterOptions")):
        try:
            options = getattr(importlib.import_module(module), cls)
            names |= {field.name for field in dataclasses.fields(options)}
        except Exception:  # noqa: BLE001 - a backend this Triton lacks adds nothing
            continue
    return frozenset(names)


@functools.lru_cache(maxsize=256)
def kernel_parameters(source: str) -> tuple[str, ...]:
    """The parameter names of the one `def` a kernel's source holds (kernels.py checks the rest of it); parsed
    once per source, however many launches name the kernel."""
    try:
        tree = ast_parse.parse(source)
    except (SyntaxError, ValueError) as exc:
        raise ProgramError(f"a kernel's source does not parse: {exc}") from None
    defs = [node for node in tree.body if isinstance(node, ast.FunctionDef)]
    if len(defs) != 1:
        raise ProgramError("a kernel's source holds exactly one def")
    return tuple(a.arg for a in defs[0].args.posonlyargs + defs[0].args.args)


def check_program(program) -> ProgramStats:
    """The structure of a program, checked by trusted code before anything in it is used."""
    if not isinstance(program, dict) or set(program) != {"kernels", "constants", "sets"}:
        raise ProgramError("a program has exactly kernels, constants and sets")
    kernels, constants, sets = program["kernels"], program["constants"], program["sets"]
    if not isinstance(kernels, dict) or len(kernels) > MAX_KERNELS:
        raise ProgramError(f"at most {MAX_KERNELS} kernels")
    for name, kernel in kernels.items():
        _ident(name, "a kernel name")
        if not isinstance(kernel, dict) or set(kernel) != {"source", "globals"}:
            raise ProgramError(f"kernel {name}: exactly source and globals")
        if not isinstance(kernel["source"], str) or len(kernel["source"]) > MAX_SOURCE_CHARS:
            raise ProgramError(f"kernel {name}: a source of at most {MAX_SOURCE_CHARS} characters")
        if not isinstance(kernel["globals"], dict) or len(kernel["globals"]) > 256:
            raise ProgramError(f"kernel {name}: at most 256 globals")
        for alias, value in kernel["globals"].items():
            _ident(alias, f"kernel {name}: a global's name")
            if not isinstance(value, dict) or len(value) != 1 or next(iter(value)) not in (
                    "module", "kernel", "value", "constexpr", "dtype"):
                raise ProgramError(f"kernel {name}: global {alias} is not a module, kernel, constant or dtype")
            kind, held = next(iter(value.items()))
            if kind in ("module",):
                if not isinstance(held, str) or not re.match(r"^[a-z_][a-z0-9_.]*$", held):
                    raise ProgramError(f"kernel {name}: global {alias} names no module")
            elif kind in ("kernel", "dtype"):
                _ident(held, f"kernel {name}: global {alias}")
                if kind == "kernel" and held not in kernels:
                    raise ProgramError(f"kernel {name}: global {alias} names an unknown kernel")
            elif held is not None and not isinstance(held, (bool, int, float, str)):
                raise ProgramError(f"kernel {name}: global {alias} is not a plain constant")
    if not isinstance(constants, list) or len(constants) > MAX_CONSTANTS:
        raise ProgramError(f"at most {MAX_CONSTANTS} constant tensors")
    constant_refs: set[int] = set()
    for index, constant in enumerate(constants):
        if not isinstance(constant, dict) or set(constant) != {"ref", "meta"}:
            raise ProgramError(f"constant {index}: exactly ref and meta")
        _walk({"ref": constant["ref"]}, constant_refs, [1], f"constant {index}")
        _tensor_meta(constant["meta"], f"constant {index}")
    if not isinstance(sets, list) or not 1 <= len(sets) <= 64:
        raise ProgramError("1 to 64 input sets")
    steps = launches = 0
    for s, program_set in enumerate(sets):
        what = f"input set {s}"
        if not isinstance(program_set, dict) or set(program_set) != {"inputs", "steps", "outputs", "constants"}:
            raise ProgramError(f"{what}: exactly inputs, steps, outputs and constants")
        defined = set()
        if not isinstance(program_set["constants"], list):
            raise ProgramError(f"{what}: constants must be a list")
        for ref in program_set["constants"]:
            if not isinstance(ref, int) or ref not in constant_refs:
                raise ProgramError(f"{what}: an unknown constant {str(ref)[:20]}")
            defined.add(ref)
        if not isinstance(program_set["inputs"], list) or len(program_set["inputs"]) > 256:
            raise ProgramError(f"{what}: at most 256 inputs")
        for i, item in enumerate(program_set["inputs"]):
            if not isinstance(item, dict) or len(item) != 1:
                raise ProgramError(f"{what}: input {i} is malformed")
            if "tensor" in item:
                tensor = item["tensor"]
                if not isinstance(tensor, dict) or set(tensor) != {"ref", "meta"}:
                    raise ProgramError(f"{what}: input {i} is malformed")
                _tensor_meta(tensor["meta"], f"{what}: input {i}")
                _walk({"ref": tensor["ref"]}, defined, [1], f"{what}: input {i}")
            elif "value" in item:
                _walk(item["value"], set(), [MAX_TREE_NODES], f"{what}: input {i}", defined)
            else:
                raise ProgramError(f"{what}: input {i} is malformed")
        if not isinstance(program_set["steps"], list) or len(program_set["steps"]) > MAX_STEPS:
            raise ProgramError(f"{what}: at most {MAX_STEPS} steps")
        for n, step in enumerate(program_set["steps"]):
            where = f"{what}, step {n}"
            if isinstance(step, dict) and set(step) == {"op", "args", "kwargs", "out"}:
                if not isinstance(step["op"], str) or not _OP_NAME.fullmatch(step["op"]):
                    raise ProgramError(f"{where}: not an operator name")
                budget = [MAX_TREE_NODES]
                if not isinstance(step["args"], list) or not isinstance(step["kwargs"], dict):
                    raise ProgramError(f"{where}: arguments must be a list and keyword arguments an object")
                _walk(step["args"], set(), budget, where, defined)
                for key, value in step["kwargs"].items():
                    _ident(key, f"{where}: keyword")
                    _walk(value, set(), budget, where, defined)
                made: set[int] = set()
                _walk_out(step["out"], made, where, defined)
                defined |= made
            elif isinstance(step, dict) and {"launch", "args", "configs"} <= set(step) <= {
                    "launch", "args", "configs", "reset_to_zero", "restore_value"}:
                _launch(step, kernels, defined, where)
                launches += 1
            else:
                raise ProgramError(f"{where}: neither an operator nor a launch")
        steps += len(program_set["steps"])
        _walk(program_set["outputs"], set(), [MAX_TREE_NODES], f"{what}: outputs", defined)
        if len(defined) > MAX_REFS:
            raise ProgramError(f"{what}: more than {MAX_REFS} tensors")
    return ProgramStats(len(kernels), steps, launches, len(constants))


def _walk_out(tree, made: set[int], where: str, defined: set[int]) -> None:
    """An operator's result: new refs, or refs it returned again (an in-place operator returns its input)."""
    if tree is None or isinstance(tree, (bool, int, float)):
        return
    if isinstance(tree, list):
        if len(tree) > 1024:
            raise ProgramError(f"{where}: too many results")
        for item in tree:
            _walk_out(item, made, where, defined)
        return
    if isinstance(tree, dict) and set(tree) == {"ref"}:
        ref = tree["ref"]
        if not isinstance(ref, int) or isinstance(ref, bool) or not 0 <= ref < MAX_REFS:
            raise ProgramError(f"{where}: a bad tensor reference")
        if ref not in defined:
            if ref in made:
                raise ProgramError(f"{where}: tensor {ref} made twice")
            made.add(ref)
        return
    raise ProgramError(f"{where}: a malformed result")


def refs_in(tree) -> list[int]:
    """Every tensor ref in an argument or result tree, in order."""
    if isinstance(tree, list):
        return [r for item in tree for r in refs_in(item)]
    if isinstance(tree, dict) and "ref" in tree:
        return [tree["ref"]]
    return []
