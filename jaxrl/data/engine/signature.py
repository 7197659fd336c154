"""The operator signature of any KernelBench-format reference, read from its source with `ast`.

`op_signature` walks `Model.forward` (and the methods, module-level functions and `nn` modules it
calls) in execution order and maps every operation to a canonical name: `torch.relu(x)`, `F.relu(x)`,
`x.relu()`, `torch.clamp(x, min=0)` and an `nn.ReLU()` built in `__init__` all give "relu";
`torch.matmul`, `@`, `torch.mm`, `torch.bmm` give "matmul", and `nn.Linear` / `F.linear` give
"matmul" then "add" (unless built with bias=False). Arithmetic operators count only when a tensor takes
part (`x * 2` is "mul", `self.a * 2` on numbers is nothing). Queries and casts (`x.size()`, `.shape`,
`.float()`, `.to(...)`) are not operations; views and copies are (`reshape`, `transpose`,
`contiguous`...). Unknown calls keep their own name, so the signature is defined for any source.
"""

from __future__ import annotations

import ast
import re

TENSOR, SCALAR, UNKNOWN = "tensor", "scalar", "unknown"

ALIASES: dict[str, str] = {
    "relu_": "relu", "hardtanh": "clamp", "clip": "clamp", "clamp_min": "clamp", "clamp_max": "clamp",
    "swish": "silu", "negative": "neg", "subtract": "sub", "rsub": "sub", "multiply": "mul", "divide": "div",
    "true_divide": "div", "amax": "max", "amin": "min", "vector_norm": "norm", "mm": "matmul", "bmm": "matmul",
    "t": "transpose", "swapaxes": "transpose", "swapdims": "transpose", "view": "reshape", "flatten": "reshape",
    "unflatten": "reshape", "squeeze": "reshape", "unsqueeze": "reshape", "view_as": "reshape",
    "reshape_as": "reshape", "expand_as": "expand", "concat": "cat", "concatenate": "cat",
    "take_along_dim": "gather", "smooth_l1_loss": "huber_loss", "add_": "add", "mul_": "mul", "sub_": "sub",
    "div_": "div", "clamp_": "clamp",
}
# Calls that read or convert without computing.
IGNORED = frozenset({
    "size", "dim", "numel", "stride", "item", "tolist", "to", "type", "float", "double", "half", "bfloat16", "int",
    "long", "bool", "cuda", "cpu", "detach", "clone", "requires_grad_", "data_ptr", "element_size", "is_contiguous",
    "__init__",
})
# torch functions that create tensors or read settings: not operations on the inputs.
CREATORS = frozenset({
    "tensor", "as_tensor", "empty", "zeros", "ones", "full", "arange", "linspace", "randn", "rand", "randint", "eye",
    "zeros_like", "ones_like", "empty_like", "full_like", "rand_like", "randn_like", "manual_seed", "no_grad", "finfo",
    "iinfo", "device", "Size", "is_tensor",
})
MODULE_NAMES: dict[str, tuple[str, ...]] = {
    "ReLU": ("relu",), "LeakyReLU": ("leaky_relu",), "PReLU": ("prelu",), "RReLU": ("rrelu",),
    "Hardtanh": ("clamp",), "ReLU6": ("relu6",), "SiLU": ("silu",), "GELU": ("gelu",), "RMSNorm": ("rms_norm",),
    "SmoothL1Loss": ("huber_loss",), "HuberLoss": ("huber_loss",), "MSELoss": ("mse_loss",), "L1Loss": ("l1_loss",),
    "CrossEntropyLoss": ("cross_entropy",), "KLDivLoss": ("kl_div",), "Identity": (), "Flatten": ("reshape",),
    "Unflatten": ("reshape",), "ELU": ("elu",), "SELU": ("selu",), "CELU": ("celu",), "LogSoftmax": ("log_softmax",),
    "LayerNorm": ("layer_norm",), "GroupNorm": ("group_norm",), "Softmax2d": ("softmax",),
}
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")


def canonical(name: str) -> str:
    return ALIASES.get(name, name)


def module_ops(class_name: str, call: ast.Call | None = None) -> tuple[str, ...]:
    """The operators an `nn.<class_name>(...)` module applies when called."""
    if class_name == "Linear":
        bias = _keyword(call, "bias") if call is not None else None
        no_bias = isinstance(bias, ast.Constant) and bias.value is False
        return ("matmul",) if no_bias else ("matmul", "add")
    if class_name == "GELU" and call is not None and _is_tanh(_keyword(call, "approximate")):
        return ("gelu_tanh",)
    if class_name in MODULE_NAMES:
        return MODULE_NAMES[class_name]
    if re.fullmatch(r"BatchNorm[123]d", class_name):
        return ("batch_norm",)
    if re.fullmatch(r"InstanceNorm[123]d", class_name):
        return ("instance_norm",)
    if re.fullmatch(r"Dropout[123]?d?|AlphaDropout", class_name):
        return ("dropout",)
    return (canonical(_CAMEL.sub("_", class_name).lower()),)


def _keyword(call: ast.Call, name: str) -> ast.expr | None:
    return next((k.value for k in call.keywords if k.arg == name), None)


def _is_tanh(node: ast.expr | None) -> bool:
    return isinstance(node, ast.Constant) and node.value == "tanh"


def _is_zero(node: ast.expr | None) -> bool:
    return isinstance(node, ast.Constant) and not isinstance(node.value, bool) and node.value == 0


def _is_self_attribute(node: ast.expr) -> bool:
    return isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self"


class _Module:
    """A callable nn module held in an attribute or a local: the operators a call applies."""

    def __init__(self, ops: tuple[str, ...]):
        self.ops = ops


def _import_aliases(tree: ast.Module) -> dict[str, str]:
    aliases = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                root = alias.name.split(".")[0]
                aliases[alias.asname or root] = alias.name if alias.asname else root
        elif isinstance(node, ast.ImportFrom) and node.module:
            for alias in node.names:
                aliases[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    return aliases


def _find_model(tree: ast.Module) -> ast.ClassDef:
    classes = [n for n in tree.body if isinstance(n, ast.ClassDef)]
    for cls in classes:
        if cls.name == "Model":
            return cls
    for cls in classes:
        if any(isinstance(f, ast.FunctionDef) and f.name == "forward" for f in cls.body):
            return cls
    raise ValueError("no Model class (nor any class with a forward method) in the source")


class _Walker:
    def __init__(self, tree: ast.Module):
        self.aliases = _import_aliases(tree)
        self.functions = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
        self.constants = {t.id for n in tree.body if isinstance(n, ast.Assign)
                          for t in n.targets if isinstance(t, ast.Name)}
        model = _find_model(tree)
        self.methods = {n.name: n for n in model.body if isinstance(n, ast.FunctionDef)}
        self.attrs: dict[str, object] = {}
        self.ops: list[str] = []
        self.depth = 0
        if "__init__" in self.methods:
            self._read_init(self.methods["__init__"])

    # -- names -----------------------------------------------------------------------------------
    def qualname(self, node: ast.expr) -> str | None:
        """torch.nn.functional.relu for F.relu, when the chain starts at an imported name."""
        if isinstance(node, ast.Name):
            return self.aliases.get(node.id)
        if isinstance(node, ast.Attribute):
            base = self.qualname(node.value)
            return f"{base}.{node.attr}" if base else None
        return None

    def _read_init(self, init: ast.FunctionDef) -> None:
        for node in ast.walk(init):
            if not isinstance(node, ast.Assign):
                continue
            for target in node.targets:
                if _is_self_attribute(target):
                    self.attrs[target.attr] = self._init_value(node.value)

    def _init_value(self, value: ast.expr) -> object:
        if isinstance(value, ast.Call):
            name = self.qualname(value.func) or ""
            if name.startswith("torch.nn.") and name.count(".") == 2:
                cls = name.rsplit(".", 1)[1]
                if cls == "Parameter":
                    return TENSOR
                if cls == "Sequential":
                    ops = tuple(op for arg in value.args for op in self._ctor_ops(arg))
                    return _Module(ops)
                if cls in ("ModuleList", "ModuleDict", "ParameterList"):
                    return UNKNOWN
                return _Module(module_ops(cls, value))
            if name.startswith("torch."):
                return TENSOR
        return SCALAR

    def _ctor_ops(self, node: ast.expr) -> tuple[str, ...]:
        if isinstance(node, ast.Call):
            value = self._init_value(node)
            if isinstance(value, _Module):
                return value.ops
        return ()

    # -- expressions -----------------------------------------------------------------------------
    def emit(self, *ops: str) -> None:
        self.ops.extend(ops)

    def expr(self, node: ast.expr | None, env: dict) -> object:
        if node is None:
            return SCALAR
        if isinstance(node, ast.Constant):
            return SCALAR
        if isinstance(node, ast.Name):
            if node.id in env:
                return env[node.id]
            return SCALAR if node.id in self.constants or node.id in self.aliases else UNKNOWN
        if isinstance(node, ast.Attribute):
            return self._attribute(node, env)
        if isinstance(node, ast.Subscript):
            kind = self.expr(node.value, env)
            self.expr(node.slice, env)
            return SCALAR if kind == SCALAR else (TENSOR if isinstance(kind, _Module) else kind)
        if isinstance(node, ast.BinOp):
            return self._binop(node, env)
        if isinstance(node, ast.UnaryOp):
            kind = self.expr(node.operand, env)
            negates_tensor = kind in (TENSOR, UNKNOWN) and not isinstance(node.operand, ast.Constant)
            if isinstance(node.op, ast.USub) and negates_tensor:
                self.emit("neg")
                return TENSOR
            return kind
        if isinstance(node, ast.Compare):
            kinds = [self.expr(node.left, env)] + [self.expr(c, env) for c in node.comparators]
            if TENSOR in kinds:
                self.emit(*(type(op).__name__.lower() for op in node.ops))
                return TENSOR
            return SCALAR
        if isinstance(node, ast.Call):
            return self._call(node, env)
        if isinstance(node, (ast.Tuple, ast.List)):
            kinds = [self.expr(e, env) for e in node.elts]
            return TENSOR if TENSOR in kinds else SCALAR if all(k == SCALAR for k in kinds) else UNKNOWN
        if isinstance(node, ast.Starred):
            return self.expr(node.value, env)
        if isinstance(node, ast.IfExp):
            self.expr(node.test, env)
            return self.expr(node.body, env) if self.expr(node.orelse, env) == SCALAR else TENSOR
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.expr):
                self.expr(child, env)
        return UNKNOWN

    def _attribute(self, node: ast.Attribute, env: dict) -> object:
        if isinstance(node.value, ast.Name) and node.value.id == "self":
            return self.attrs.get(node.attr, UNKNOWN)
        if self.qualname(node):
            return SCALAR  # torch.float32, math.pi
        kind = self.expr(node.value, env)
        if node.attr in ("T", "mT", "H", "mH"):
            self.emit("transpose")
            return TENSOR
        if node.attr in ("shape", "dtype", "device", "ndim", "is_cuda", "training"):
            return SCALAR
        return TENSOR if isinstance(kind, _Module) or kind in (TENSOR, UNKNOWN) else kind

    _BINOPS = {ast.Add: "add", ast.Sub: "sub", ast.Mult: "mul", ast.Div: "div", ast.MatMult: "matmul",
               ast.FloorDiv: "floor_divide", ast.Mod: "remainder", ast.Pow: "pow"}

    def _binop(self, node: ast.BinOp, env: dict) -> object:
        left, right = self.expr(node.left, env), self.expr(node.right, env)
        if left == SCALAR and right == SCALAR:
            return SCALAR
        op = self._BINOPS.get(type(node.op), type(node.op).__name__.lower())
        if op == "pow" and isinstance(node.right, ast.Constant) and node.right.value == 2:
            op = "square"
        self.emit(op)
        return TENSOR

    def _call(self, node: ast.Call, env: dict) -> object:
        func = node.func
        # self.method(...) and self.module(...)
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "self":
            if func.attr in self.methods:
                return self._inline(self.methods[func.attr], node, env, skip_self=True)
            held = self.attrs.get(func.attr)
            positional, keywords = self._args(node, env)
            if isinstance(held, _Module):
                self.emit(*held.ops)
                return TENSOR
            return TENSOR if TENSOR in positional else UNKNOWN
        if isinstance(func, ast.Name):
            if isinstance(env.get(func.id), _Module):
                self._args(node, env)
                self.emit(*env[func.id].ops)
                return TENSOR
            if func.id in self.functions:
                return self._inline(self.functions[func.id], node, env, skip_self=False)
        qual = self.qualname(func)
        if qual is not None:
            return self._library_call(qual, node, env)
        if isinstance(func, ast.Attribute):  # a method of a tensor (or of something unknown)
            receiver = self.expr(func.value, env)
            positional, keywords = self._args(node, env)
            if receiver == SCALAR or func.attr in IGNORED:
                return receiver if receiver == SCALAR else TENSOR
            self.emit(*self._named_ops(func.attr, node, node.args, positional, keywords))
            return TENSOR
        callee = self.expr(func, env)
        self._args(node, env)
        if isinstance(callee, _Module):
            self.emit(*callee.ops)
            return TENSOR
        return UNKNOWN

    def _library_call(self, qual: str, node: ast.Call, env: dict) -> object:
        parts = qual.split(".")
        positional, keywords = self._args(node, env)
        if parts[0] != "torch":
            return SCALAR if parts[0] in ("math", "operator") else UNKNOWN
        name = parts[-1]
        if len(parts) == 3 and parts[1] == "nn" and name[:1].isupper():  # nn.ReLU()(x): built and called in place
            return _Module(module_ops(name, node))
        if name in IGNORED or name in CREATORS:
            return TENSOR if name in CREATORS else SCALAR
        # the arguments after the tensor operated on
        self.emit(*self._named_ops(name, node, node.args[1:], positional[1:], keywords))
        return TENSOR

    def _named_ops(self, name: str, node: ast.Call, args: list[ast.expr], kinds: list[object],
                   keywords: dict[str, object]) -> tuple[str, ...]:
        """Canonical operators of torch.<name>(x, *args) / F.<name>(x, *args) / x.<name>(*args)."""
        if name in ("clamp", "clip", "clamp_min", "clamp_"):
            low = _keyword(node, "min") or (args[0] if args else None)
            high = _keyword(node, "max") or (args[1] if len(args) > 1 else None)
            return ("relu",) if _is_zero(low) and high is None else ("clamp",)
        if name == "gelu":
            return ("gelu_tanh",) if _is_tanh(_keyword(node, "approximate")) else ("gelu",)
        if name in ("max", "min"):  # with a second tensor: elementwise; otherwise a reduction
            other = keywords.get("other", kinds[0] if kinds else None)
            return (("maximum" if name == "max" else "minimum") if other == TENSOR else name,)
        if name == "pow":
            exponent = _keyword(node, "exponent") or (args[0] if args else None)
            return ("square",) if isinstance(exponent, ast.Constant) and exponent.value == 2 else ("pow",)
        if name == "linear":
            bias = _keyword(node, "bias")
            has_bias = len(args) > 1 or (bias is not None and not isinstance(bias, ast.Constant))
            return ("matmul", "add") if has_bias else ("matmul",)
        if name in ("addmm", "baddbmm", "addbmm"):
            return ("matmul", "add")
        return (canonical(name),)

    def _args(self, node: ast.Call, env: dict) -> tuple[list[object], dict[str, object]]:
        positional = [self.expr(arg, env) for arg in node.args]
        keywords = {k.arg: self.expr(k.value, env) for k in node.keywords}
        return positional, keywords

    def _inline(self, function: ast.FunctionDef, node: ast.Call, env: dict, skip_self: bool) -> object:
        kinds, _ = self._args(node, env)
        if self.depth > 20:
            return UNKNOWN
        params = [a.arg for a in function.args.args][1 if skip_self else 0:]
        local = {name: kind for name, kind in zip(params, kinds)}
        self.depth += 1
        try:
            return self.body(function.body, local)
        finally:
            self.depth -= 1

    # -- statements ------------------------------------------------------------------------------
    def body(self, statements: list[ast.stmt], env: dict) -> object:
        result = UNKNOWN
        for stmt in statements:
            value = self.statement(stmt, env)
            if value is not None and result == UNKNOWN:
                result = value
        return result

    def statement(self, stmt: ast.stmt, env: dict) -> object | None:
        if isinstance(stmt, ast.Return):
            return self.expr(stmt.value, env)
        if isinstance(stmt, (ast.Assign, ast.AnnAssign)):
            kind = self.expr(stmt.value, env)
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
            for target in targets:
                self._bind(target, kind, env)
            return None
        if isinstance(stmt, ast.AugAssign):
            target = stmt.target
            left = env.get(target.id, UNKNOWN) if isinstance(target, ast.Name) else self.expr(target, env)
            right = self.expr(stmt.value, env)
            if not (left == SCALAR and right == SCALAR):
                self.emit(self._BINOPS.get(type(stmt.op), "op"))
            return None
        if isinstance(stmt, ast.Expr):
            self.expr(stmt.value, env)
            return None
        result = None
        for field in ("test", "iter", "items"):
            value = getattr(stmt, field, None)
            if isinstance(value, ast.expr):
                self.expr(value, env)
            elif isinstance(value, list):
                for item in value:
                    self.expr(getattr(item, "context_expr", None), env)
        if isinstance(stmt, ast.For):
            self._bind(stmt.target, UNKNOWN, env)
        for field in ("body", "orelse", "finalbody"):
            inner = getattr(stmt, field, None)
            if isinstance(inner, list):
                value = self.body(inner, env)
                result = result if result not in (None, UNKNOWN) else (value if value != UNKNOWN else result)
        for handler in getattr(stmt, "handlers", []):
            self.body(handler.body, env)
        return result

    def _bind(self, target: ast.expr, kind: object, env: dict) -> None:
        if isinstance(target, ast.Name):
            env[target.id] = kind
        elif isinstance(target, (ast.Tuple, ast.List)):
            for element in target.elts:
                self._bind(element, TENSOR if kind == TENSOR else UNKNOWN, env)


def op_signature(reference_source: str) -> tuple[str, ...]:
    """The canonical operators `Model.forward` applies, in execution order (see the module docstring)."""
    tree = ast.parse(reference_source)
    walker = _Walker(tree)
    forward = walker.methods.get("forward")
    if forward is None:
        raise ValueError("the model has no forward method")
    env = {}
    for arg in forward.args.args[1:] + forward.args.kwonlyargs:
        annotation = arg.annotation
        scalar = isinstance(annotation, ast.Name) and annotation.id in ("int", "float", "bool")
        env[arg.arg] = SCALAR if scalar else TENSOR
    if forward.args.vararg:
        env[forward.args.vararg.arg] = TENSOR
    walker.body(forward.body, env)
    return tuple(walker.ops)
