"""Inductor's output for a reference, turned into a standalone `ModelNew` module of plain Triton kernels.

TorchInductor writes a Python "wrapper" module: its kernels as source strings handed to its own
autotuning runtime, and a `call(args)` function that allocates buffers and launches them. A training
example (and a candidate the sandbox can judge) must stand alone, so the converter:

- keeps each kernel's `@triton.jit` function, drops Inductor's heuristics decorator and imports, and
  writes the runtime helpers the kernel calls into the module (`helpers.py`);
- turns `call` into `launch_kernels(args, device)`: Inductor's allocations become `torch.empty_strided`,
  its reinterpretations `torch.as_strided`, and each `kernel.run(...)` an explicit launch with a grid and
  block sizes chosen from the kernel's kind and size hints;
- writes `ModelNew` with the reference's constructor (same weights for the same seed) and a forward
  that passes `launch_kernels` the graph's inputs in Inductor's order (`GraphCapture.arguments`).

Anything it cannot express without Inductor's runtime (extern kernels such as cuBLAS matmuls, aten
fallbacks, templates, other grid kinds) raises ConversionError naming it. Pure text work: no torch.
"""

from __future__ import annotations

import ast
import dataclasses
import re

from sandbox_service import ast_parse
from sandbox_service.inductor.helpers import (
    PORTABLE_LIBDEVICE, PORTABLE_LIBDEVICE_HELPERS, PREFIX, SUPPORTED, helper_sources, libdevice_helper_sources,
)

KERNEL_KINDS = ("pointwise", "reduction", "persistent_reduction")
GRID_TYPES = ("Grid1D", "Grid2D", "Grid3D", "Grid2DWithYZOverflow")
MAX_GRID_Y = 65535
ALLOCATORS = ("empty_strided_cuda", "empty_strided_cpu", "empty_strided_xpu")
DROPPED_CALLS = ("assert_size_stride", "assert_alignment", "start_graph", "end_graph", "check_bounds")
# Names of Inductor's runtime a converted module cannot use.
RUNTIME_NAMES = ("extern_kernels", "aten", "inductor_ops", "async_compile", "alloc_from_pool", "empty_strided_p2p",
                 "triton_helpers", "triton_heuristics", "_quantized", "torch.ops")
BLOCK_PARAMS = ("XBLOCK", "YBLOCK", "ZBLOCK", "R0_BLOCK", "R1_BLOCK")


class ConversionError(ValueError):
    """Why Inductor's module cannot become a standalone ModelNew."""


TENSOR, NUMBER, WRAPPED_NUMBER = "tensor", "number", "wrapped_number"


@dataclasses.dataclass(frozen=True)
class GraphArgument:
    """One input of the compiled graph: how the forward gets it (a Python expression over `L`, dynamo's
    name for the frame's locals, e.g. "L['x']", "L['self']._modules['fc']._parameters['weight']",
    "L['x'].size()[0]") and its kind: a tensor, a number (a size), or a Python number that Inductor takes
    as a 0-d tensor and reads with `.item()` (a float attribute such as a scale)."""

    source: str
    kind: str

    def __post_init__(self) -> None:
        if self.kind not in (TENSOR, NUMBER, WRAPPED_NUMBER):
            raise ValueError(f"unknown graph argument kind {self.kind!r}")


@dataclasses.dataclass(frozen=True)
class GraphCapture:
    """What compiling the reference produced: Inductor's wrapper module, the graph's arguments in the
    order `call(args)` takes them, and how many of `call`'s results the forward returns (as a tuple, or
    the first alone)."""

    wrapper: str
    arguments: tuple[GraphArgument, ...]
    outputs: int
    returns_tuple: bool


@dataclasses.dataclass(frozen=True)
class ConvertedModule:
    source: str
    kernels: int
    helpers: tuple[str, ...]


@dataclasses.dataclass(frozen=True)
class Kernel:
    """One Inductor kernel: its @triton.jit source (decorators and imports gone, helpers renamed) and what
    its launch needs."""

    name: str
    source: str
    params: tuple[str, ...]  # runtime parameters, in order
    constexprs: tuple[str, ...]  # block-size parameters the launch must give
    kind: str
    grid_type: str
    size_hints: dict[str, int]
    reduction_hint: str
    axes: dict[str, int]  # grid axis of each tiled dimension prefix ("x": 0, "y": 1, ...)
    fixed_blocks: dict[str, int]  # block sizes fixed inside the kernel (R0_BLOCK of a persistent reduction)
    helpers: frozenset[str]
    libdevice_helpers: frozenset[str]


def convert(reference_source: str, capture: GraphCapture, portable: bool = False) -> ConvertedModule:
    """The standalone module; `portable`: without libdevice, which the Triton interpreter cannot run."""
    reference = _Reference(reference_source)
    wrapper = _parse(capture.wrapper, "Inductor's wrapper")
    kernels = _kernels(wrapper, portable)
    if not kernels:
        raise ConversionError("Inductor generated no Triton kernel")
    call = _call_function(wrapper)
    names = _unpacked_args(call)
    if len(names) != len(capture.arguments):
        raise ConversionError(f"Inductor's call takes {len(names)} arguments, the graph has {len(capture.arguments)}")
    wrapped = {name for name, a in zip(names, capture.arguments) if a.kind == WRAPPED_NUMBER}
    launch = _launch_function(call, {k.name: k for k in kernels}, wrapped)
    helpers = sorted(set().union(*(k.helpers for k in kernels)))
    libdevice_helpers = set().union(*(k.libdevice_helpers for k in kernels))
    header = _header(kernels)
    parts = [header, reference.preamble_without(header.splitlines())]
    if helpers:
        parts.append(helper_sources(set(helpers)))
    if libdevice_helpers:
        parts.append(libdevice_helper_sources(libdevice_helpers))
    parts += [k.source for k in kernels]
    parts.append(launch)
    parts.append(reference.model_new(capture))
    source = "\n\n".join(p.strip("\n") for p in parts if p.strip()) + "\n"
    _parse(source, "the converted module")
    return ConvertedModule(source=source, kernels=len(kernels), helpers=tuple(helpers))


def _parse(source: str, what: str) -> ast.Module:
    try:
        return ast_parse.parse(source)
    except SyntaxError as exc:
        raise ConversionError(f"{what} does not parse: {exc}") from None


def _header(kernels: list[Kernel]) -> str:
    lines = ["import torch", "import torch.nn as nn", "import triton", "import triton.language as tl"]
    text = "\n".join(k.source for k in kernels)
    if re.search(r"\blibdevice\.", text):
        lines.append("from triton.language.extra import libdevice")
    if re.search(r"\btl_math\.", text):
        lines.append("from triton.language import math as tl_math")
    return "\n".join(lines)


# ----------------------------------------------------------------------------------------------- kernels
def _kernels(wrapper: ast.Module, portable: bool) -> list[Kernel]:
    kernels = []
    for node in wrapper.body:
        if not isinstance(node, ast.Assign) or not isinstance(node.value, ast.Call):
            continue
        func = node.value.func
        if not (isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "async_compile"):
            continue
        name = node.targets[0].id if isinstance(node.targets[0], ast.Name) else "?"
        if func.attr != "triton":
            raise ConversionError(f"kernel {name} is not Triton (async_compile.{func.attr})")
        args = node.value.args
        if len(args) < 2 or not isinstance(args[1], ast.Constant) or not isinstance(args[1].value, str):
            raise ConversionError(f"kernel {name}: no source string")
        kernels.append(_kernel(name, args[1].value, len(kernels), portable))
    return kernels


def _kernel(name: str, source: str, index: int, portable: bool) -> Kernel:
    tree = _parse(source, f"kernel {name}")
    functions = [n for n in tree.body if isinstance(n, ast.FunctionDef)]
    main = next((f for f in functions if f.name == name), None)
    if main is None:
        raise ConversionError(f"kernel {name}: its function is missing from its source")
    kind, size_hints, reduction_hint, grid_type = _heuristics(main)
    if grid_type not in GRID_TYPES:
        raise ConversionError(f"kernel {name}: grid type {grid_type} is not supported")
    # helper functions Inductor defines beside the kernel (scan combiners) are renamed per kernel
    renames = {f.name: f"{f.name}_k{index}" for f in functions if f is not main}
    used_helpers: set[str] = set()
    libdevice_helpers: set[str] = set()

    class Rewrite(ast.NodeTransformer):
        def visit_Attribute(self, node: ast.Attribute):
            if isinstance(node.value, ast.Name) and node.value.id == "triton_helpers":
                if node.attr not in SUPPORTED:
                    raise ConversionError(f"kernel {name} uses triton_helpers.{node.attr}, which has no standalone "
                                          "version")
                used_helpers.add(node.attr)
                return ast.copy_location(ast.Name(PREFIX + node.attr, ast.Load()), node)
            if portable and isinstance(node.value, ast.Name) and node.value.id == "libdevice":
                if node.attr in PORTABLE_LIBDEVICE:
                    return ast.copy_location(ast_parse.parse(PORTABLE_LIBDEVICE[node.attr], mode="eval").body, node)
                if node.attr in PORTABLE_LIBDEVICE_HELPERS:
                    libdevice_helpers.add(node.attr)
                    return ast.copy_location(ast.Name(f"{PREFIX}libdevice_{node.attr}", ast.Load()), node)
                raise ConversionError(f"kernel {name} uses libdevice.{node.attr}, which the Triton interpreter "
                                      "cannot run")
            return self.generic_visit(node)

        def visit_Name(self, node: ast.Name):
            if node.id in renames:
                node.id = renames[node.id]
            return node

    kept = []
    for function in functions:
        function.decorator_list = [d for d in function.decorator_list if ast.unparse(d) == "triton.jit"]
        if not function.decorator_list:
            raise ConversionError(f"kernel {name}: {function.name} is not a @triton.jit function")
        function.name = renames.get(function.name, function.name)
        kept.append(Rewrite().visit(function))
    for node in tree.body:
        if not isinstance(node, (ast.FunctionDef, ast.Import, ast.ImportFrom)) and not _is_driver_call(node):
            raise ConversionError(f"kernel {name}: unexpected statement {ast.unparse(node)[:80]!r}")
    params, constexprs = [], []
    for arg in main.args.args:
        annotation = ast.unparse(arg.annotation) if arg.annotation is not None else ""
        (constexprs if annotation == "tl.constexpr" else params).append(arg.arg)
    unknown = [c for c in constexprs if c not in BLOCK_PARAMS]
    if unknown:
        raise ConversionError(f"kernel {name}: compile-time parameters {unknown} have no known value")
    text = "\n\n\n".join(ast.unparse(f) for f in kept)
    return Kernel(name=name, source=text, params=tuple(params), constexprs=tuple(constexprs), kind=kind, grid_type=grid_type,
                  size_hints=size_hints, reduction_hint=reduction_hint, axes=_grid_axes(main),
                  fixed_blocks=_fixed_blocks(main), helpers=frozenset(used_helpers),
                  libdevice_helpers=frozenset(libdevice_helpers))


def _is_driver_call(node: ast.stmt) -> bool:
    return isinstance(node, ast.Expr) and ast.unparse(node).startswith("triton_helpers.set_driver_to_")


def _heuristics(function: ast.FunctionDef) -> tuple[str, dict[str, int], str, str]:
    """(kind, size hints, reduction hint, grid type) from Inductor's @triton_heuristics.<kind>(...) decorator."""
    for decorator in function.decorator_list:
        if not (isinstance(decorator, ast.Call) and ast.unparse(decorator.func).startswith("triton_heuristics.")):
            continue
        kind = ast.unparse(decorator.func).split(".", 1)[1]
        if kind not in KERNEL_KINDS:
            raise ConversionError(f"kernel {function.name}: kind {kind} is not supported")
        keywords = {k.arg: k.value for k in decorator.keywords}
        hints: dict[str, int] = {}
        if isinstance(keywords.get("size_hints"), ast.Dict):
            for key, value in zip(keywords["size_hints"].keys, keywords["size_hints"].values):
                if isinstance(key, ast.Constant) and isinstance(value, ast.Constant):
                    hints[str(key.value)] = int(value.value)
        reduction = ast.unparse(keywords["reduction_hint"]).split(".")[-1] if "reduction_hint" in keywords else ""
        grid_type = "Grid1D"
        meta = keywords.get("inductor_meta")
        if isinstance(meta, ast.Dict):
            for key, value in zip(meta.keys, meta.values):
                if isinstance(key, ast.Constant) and key.value == "grid_type" and isinstance(value, ast.Constant):
                    grid_type = str(value.value)
        return kind, hints, reduction, grid_type
    raise ConversionError(f"kernel {function.name}: no Inductor heuristics decorator (a template or user kernel)")


def _grid_axes(function: ast.FunctionDef) -> dict[str, int]:
    """Which program axis tiles each dimension, from the kernel's `xoffset = tl.program_id(0) * XBLOCK` lines."""
    axes = {}
    for node in ast.walk(function):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            match = re.fullmatch(r"([xyz])offset", node.targets[0].id)
            ids = re.findall(r"tl\.program_id\((\d)\)", ast.unparse(node.value))
            if match and ids:
                axes[match.group(1)] = int(ids[0])
    return axes


def _fixed_blocks(function: ast.FunctionDef) -> dict[str, int]:
    """Block sizes the kernel fixes itself (`R0_BLOCK: tl.constexpr = 64`, `XBLOCK: tl.constexpr = 1`)."""
    fixed = {}
    for node in function.body:
        if (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.target.id in BLOCK_PARAMS
                and isinstance(node.value, ast.Constant) and isinstance(node.value.value, int)):
            fixed[node.target.id] = node.value.value
    return fixed


def _pow2(n: int) -> int:
    return 1 << max(0, (max(1, n) - 1).bit_length())


def block_sizes(kernel: Kernel) -> tuple[dict[str, int], int]:
    """Block sizes for the kernel's compile-time parameters and its warp count, from its kind and hints: the
    shapes Inductor's own heuristics start from. (Larger blocks for the Triton interpreter were measured
    and were not faster at the `cpu` scale: padding costs what fewer programs save.)"""
    hint = {p: _pow2(kernel.size_hints.get(p, 1024)) for p in ("x", "y", "z")}
    r_hint = _pow2(kernel.size_hints.get("r0_", 1024))
    blocks: dict[str, int] = {}
    if kernel.kind == "pointwise":
        tiled = [p for p in ("x", "y", "z") if f"{p.upper()}BLOCK" in kernel.constexprs]
        per_dim = {1: 1024, 2: 32, 3: 16}.get(len(tiled), 16)
        for p in tiled:
            blocks[f"{p.upper()}BLOCK"] = max(1, min(per_dim, hint[p]))
    elif kernel.kind == "reduction":
        if kernel.reduction_hint == "INNER":
            x_block, r_block = 1, min(2048, r_hint)
        elif kernel.reduction_hint in ("OUTER", "OUTER_TINY"):
            x_block, r_block = min(64, hint["x"]), min(8, r_hint)
        else:
            x_block, r_block = min(8, hint["x"]), min(256, r_hint)
        blocks.update(XBLOCK=x_block, R0_BLOCK=r_block, R1_BLOCK=min(8, r_hint))
    else:  # persistent reduction: the whole reduced dimension in one block, R0_BLOCK fixed by the kernel
        r_block = kernel.fixed_blocks.get("R0_BLOCK", r_hint)
        blocks["XBLOCK"] = max(1, min(hint["x"], 4096 // max(1, r_block), 64))
    chosen = {c: blocks.get(c, 1) for c in kernel.constexprs}
    elements = 1
    for value in [*chosen.values(), *kernel.fixed_blocks.values()]:
        elements *= value
    return chosen, 8 if kernel.kind != "pointwise" and elements >= 2048 else 4


def _launch(kernel: Kernel, call: ast.Call) -> ast.expr:
    """`kernel.run(a, b, n, stream=s)` as `kernel[grid](a, b, n, XBLOCK=..., num_warps=...)`."""
    if any(isinstance(a, ast.Starred) for a in call.args):
        raise ConversionError(f"kernel {kernel.name} is launched with unpacked arguments")
    if len(call.args) != len(kernel.params):
        raise ConversionError(f"kernel {kernel.name} takes {len(kernel.params)} arguments, its launch passes "
                              f"{len(call.args)}")
    given = {k.arg for k in call.keywords} - {"stream"}
    if given:
        raise ConversionError(f"kernel {kernel.name} is launched with {sorted(given)}")
    value_of = dict(zip(kernel.params, call.args))
    blocks, warps = block_sizes(kernel)
    grid: list[str] = ["1", "1", "1"]
    for prefix in ("x", "y", "z"):
        numel = value_of.get(f"{prefix}numel")
        if numel is None:
            continue
        block_name = f"{prefix.upper()}BLOCK"
        block = blocks.get(block_name, kernel.fixed_blocks.get(block_name))
        if block is None:
            raise ConversionError(f"kernel {kernel.name}: no block size for {prefix}")
        axis = kernel.axes.get(prefix, "xyz".index(prefix))
        count = f"triton.cdiv({ast.unparse(numel)}, {block})"
        if prefix == "y" and kernel.grid_type == "Grid2DWithYZOverflow":  # y blocks past the axis limit go to z
            grid[1], grid[2] = f"min({count}, {MAX_GRID_Y})", f"triton.cdiv({count}, {MAX_GRID_Y})"
        else:
            grid[axis] = count
    while len(grid) > 1 and grid[-1] == "1":
        grid.pop()
    keywords = ", ".join(f"{k}={v}" for k, v in blocks.items())
    arguments = ", ".join(ast.unparse(a) for a in call.args)
    text = f"{kernel.name}[({', '.join(grid)},)]({arguments}{', ' if keywords else ''}{keywords}, num_warps={warps})"
    return ast_parse.parse(text, mode="eval").body


# ------------------------------------------------------------------------------------------ call -> launch
def _call_function(wrapper: ast.Module) -> ast.FunctionDef:
    for node in wrapper.body:
        if isinstance(node, ast.FunctionDef) and node.name == "call":
            return node
        if isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, ast.FunctionDef) and item.name == "call":
                    return item
    raise ConversionError("Inductor's wrapper has no call function")


def _unpacked_args(call: ast.FunctionDef) -> list[str]:
    for node in call.body:
        if (isinstance(node, ast.Assign) and isinstance(node.value, ast.Name) and node.value.id == "args"
                and isinstance(node.targets[0], (ast.Tuple, ast.List))):
            return [ast.unparse(e) for e in node.targets[0].elts]
    raise ConversionError("Inductor's call does not unpack its arguments")


def _launch_function(call: ast.FunctionDef, kernels: dict[str, Kernel], wrapped: set[str]) -> str:
    body = _Lowering(kernels, wrapped).statements(call.body)
    lines = ["def launch_kernels(args, device):",
             '    """Inductor\'s schedule for the graph: allocate the buffers and launch the kernels in order; the '
             'graph\'s outputs come first in what it returns."""']
    for node in body:
        lines += ["    " + line for line in ast.unparse(ast.fix_missing_locations(node)).splitlines()]
    return "\n".join(lines) + "\n"


class _Lowering:
    """Rewrites `call`'s statements so that they need nothing of Inductor's runtime."""

    def __init__(self, kernels: dict[str, Kernel], wrapped: set[str]):
        self.kernels = kernels
        self.wrapped = wrapped  # arguments Inductor reads with .item(): the forward passes the number itself

    def statements(self, body: list[ast.stmt]) -> list[ast.stmt]:
        out: list[ast.stmt] = []
        for node in body:
            out.extend(self.statement(node))
        return out or [ast.Pass()]

    def statement(self, node: ast.stmt) -> list[ast.stmt]:
        text = ast.unparse(node)
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
            callee = ast.unparse(node.value.func)
            if callee == "args.clear" or callee in DROPPED_CALLS or callee.startswith("torch.cuda.set_device"):
                return []
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call) and \
                ast.unparse(node.value.func) == "get_raw_stream":
            return []
        if isinstance(node, ast.With):
            guards = [ast.unparse(item.context_expr) for item in node.items]
            if all("_DeviceGuard" in g for g in guards):
                return self.statements(node.body)
            raise ConversionError(f"Inductor's call uses a context {guards}")
        if isinstance(node, (ast.If, ast.For, ast.While, ast.Try)):
            raise ConversionError(f"Inductor's call has control flow: {text[:80]!r}")
        for name in RUNTIME_NAMES:
            if re.search(rf"(?<![\w.]){re.escape(name)}\b", text):
                raise ConversionError(f"Inductor's call uses {name} (not a Triton kernel): {text[:100]!r}")
        unpacking = isinstance(node, ast.Assign) and ast.unparse(node.value) == "args"
        if not isinstance(node, ast.Delete) and not unpacking:
            read = {id(n.func.value) for n in ast.walk(node) if _is_item_call(n)}
            misused = {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and n.id in self.wrapped
                       and id(n) not in read}
            if misused:
                raise ConversionError(f"Inductor's call uses the number {min(misused)} as a tensor: {text[:100]!r}")
        return [_CallRewrite(self.kernels, self.wrapped).visit(node)]


def _is_item_call(node: ast.AST) -> bool:
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "item"
            and isinstance(node.func.value, ast.Name) and not node.args)


class _CallRewrite(ast.NodeTransformer):
    def __init__(self, kernels: dict[str, Kernel], wrapped: set[str]):
        self.kernels = kernels
        self.wrapped = wrapped

    def visit_Call(self, node: ast.Call):
        func = node.func
        if _is_item_call(node) and func.value.id in self.wrapped:
            return func.value  # the forward passes the number itself
        self.generic_visit(node)
        name = ast.unparse(func)
        if name in ALLOCATORS:
            size, stride, dtype = node.args[:3]
            return ast.Call(ast_parse.parse("torch.empty_strided", mode="eval").body, [size, stride],
                            [ast.keyword("dtype", dtype), ast.keyword("device", ast.Name("device", ast.Load()))])
        if name == "reinterpret_tensor":
            return ast.Call(ast_parse.parse("torch.as_strided", mode="eval").body, node.args, [])
        if isinstance(func, ast.Attribute) and func.attr == "run" and isinstance(func.value, ast.Name):
            kernel = self.kernels.get(func.value.id)
            if kernel is None:
                raise ConversionError(f"Inductor's call runs {func.value.id}, which is not one of its kernels")
            return _launch(kernel, node)
        return node


# ---------------------------------------------------------------------------------------------- ModelNew
class _Reference:
    """The parts of the reference the module keeps: its top-level code (imports, constants, other classes)
    and Model's constructor and methods other than forward."""

    def __init__(self, source: str):
        tree = _parse(source, "the reference")
        self.source = source
        model = next((n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Model"), None)
        if model is None:
            raise ConversionError("the reference has no class Model")
        self.model = model
        forward = next((n for n in model.body if isinstance(n, ast.FunctionDef) and n.name == "forward"), None)
        if forward is None:
            raise ConversionError("Model has no forward")
        if forward.args.vararg or forward.args.kwarg or forward.args.kwonlyargs or forward.args.posonlyargs:
            raise ConversionError("Model.forward takes *args, **kwargs or keyword-only arguments")
        self.forward = forward
        skipped = ("get_inputs", "get_init_inputs")
        self.top_level = [
            ast.get_source_segment(source, n) or ast.unparse(n) for n in tree.body
            if not (isinstance(n, ast.ClassDef) and n.name == "Model")
            and not (isinstance(n, ast.FunctionDef) and n.name in skipped)
            and not _is_docstring(n)
        ]

    def preamble_without(self, lines: list[str]) -> str:
        """The reference's top-level code but for statements already in `lines` (the header's imports)."""
        return "\n".join(s for s in self.top_level if s not in lines)

    def model_new(self, capture: GraphCapture) -> str:
        params = [a.arg for a in self.forward.args.args]
        names = {"self": params[0], **{p: p for p in params[1:]}}
        arguments = [_argument_expression(a.source, names) for a in capture.arguments]
        tensors = [expr for expr, a in zip(arguments, capture.arguments) if a.kind == TENSOR]
        if not tensors:
            raise ConversionError("the graph has no tensor argument to place its buffers by")
        methods = []
        for node in self.model.body:
            if isinstance(node, ast.FunctionDef) and node.name != "forward":
                methods.append(_indent(ast.unparse(_RenameModel().visit(node))))
        forward_args = ast.unparse(self.forward.args)
        results = (f"({', '.join(f'outputs[{i}]' for i in range(capture.outputs))}{',' if capture.outputs == 1 else ''})"
                   if capture.returns_tuple else "outputs[0]")
        bases = ", ".join(ast.unparse(b) for b in self.model.bases) or "nn.Module"
        forward = (
            f"    def forward({forward_args}):\n"
            f"        outputs = launch_kernels([{', '.join(arguments)}], {tensors[0]}.device)\n"
            f"        return {results}"
        )
        return f"class ModelNew({bases}):\n" + "\n\n".join([*methods, forward]) + "\n"


def _is_docstring(node: ast.stmt) -> bool:
    return isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)


class _RenameModel(ast.NodeTransformer):
    """Model's methods inside ModelNew: `super(Model, self)` and other mentions of Model name ModelNew."""

    def visit_Name(self, node: ast.Name):
        if node.id == "Model":
            node.id = "ModelNew"
        return node


def _indent(text: str) -> str:
    return "\n".join(("    " + line) if line.strip() else line for line in text.splitlines())


_CONTAINERS = ("_modules", "_parameters", "_buffers")


def _argument_expression(source: str, names: dict[str, str]) -> str:
    """dynamo's source of a graph input ("L['self']._modules['fc']._parameters['weight']") as the forward
    reads it ("self.fc.weight")."""
    try:
        tree = ast_parse.parse(source, mode="eval").body
    except SyntaxError:
        raise ConversionError(f"graph input {source!r} is not an expression") from None

    def rewrite(node: ast.expr) -> ast.expr:
        if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant):
            key = node.slice.value
            base = node.value
            if isinstance(base, ast.Name) and base.id == "L":
                if key not in names:
                    raise ConversionError(f"graph input {source!r} is not an argument of forward")
                return ast.Name(names[key], ast.Load())
            if isinstance(base, ast.Attribute) and base.attr in _CONTAINERS and isinstance(key, str):
                owner = rewrite(base.value)
                if key.isidentifier():
                    return ast.Attribute(owner, key, ast.Load())
                return ast.Call(ast.Name("getattr", ast.Load()), [owner, ast.Constant(key)], [])
            if isinstance(key, int):
                return ast.Subscript(rewrite(base), node.slice, ast.Load())
        if isinstance(node, ast.Attribute):
            return ast.Attribute(rewrite(node.value), node.attr, ast.Load())
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and not node.args:
            return ast.Call(ast.Attribute(rewrite(node.func.value), node.func.attr, ast.Load()), [], [])
        raise ConversionError(f"graph input {source!r} does not come from forward's arguments")

    return ast.unparse(rewrite(tree))
