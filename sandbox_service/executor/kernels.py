"""Trusted: show that a program's kernels are legal Triton, then make them a module the executor imports.

Triton compiles a kernel by walking its Python syntax tree. Its front end calls plain Python at compile time
(any callable a name or an attribute resolves to, with constant arguments), and under the interpreter the
kernel body *is* Python. So before anything trusted compiles or runs a kernel, its tree is checked here:

- the source is one `def` (no decorator), whose defaults and annotations are constants or Triton names;
- its body uses only statements Triton compiles (no imports, nested functions, lambdas, classes, `global`,
  `try`, `with`, comprehensions, walrus, starred or `del`);
- every name it reads is a parameter, a local, one of the globals the program declares (Triton's modules,
  the program's other kernels, plain constants, dtypes) or a builtin Triton knows (range, min, max...);
- a module's name appears only as the root of an attribute chain (`tl.load`), never as a value: no module
  held in a local, passed, or picked by an expression (`t = triton`, `(triton if c else tl).x`), so every
  module is reached through a chain this check resolves;
- that chain reaches only Triton's language (or Python's `math`): `tl.load`, `libdevice.exp`, `triton.cdiv`,
  never `triton.runtime...`, `tl.core.os...`; any other attribute (of a tensor, a dtype, a constant) is one
  that Triton's own value classes define, and none starts with `_`;
- nothing but a plain name is ever assigned (no attribute or item assignment: `tl.load = ...`);
- no string holds a line break (the interpreter re-reads a kernel's lines and takes the last `def` it finds).

What passes can name nothing but Triton's own operations, so neither Triton's front end nor the
interpreter runs anything the candidate chose. The module is written from the checked syntax tree itself
(`ast.unparse`, docstrings dropped), never from the candidate's text, with imports and constants the
executor spells itself.
"""

from __future__ import annotations

import ast
import math
import types
from pathlib import Path

from sandbox_service import ast_parse
from sandbox_service.interface.program import ProgramError, triton_option_names

ALLOWED_MODULES = frozenset({
    "triton", "triton.language", "triton.language.math", "triton.language.standard", "triton.language.extra",
    "triton.language.extra.libdevice", "triton.language.extra.cuda", "triton.language.extra.cuda.libdevice",
    "math",
})
TRITON_ROOT_NAMES = frozenset({"cdiv", "next_power_of_2", "language", "constexpr"})
ALLOWED_BUILTINS = frozenset({"range", "min", "max", "len", "int", "float", "bool", "abs", "print", "isinstance",
                              "tuple", "zip", "enumerate", "True", "False", "None"})
_FORBIDDEN_NODES = (
    ast.Lambda, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Import, ast.ImportFrom, ast.Global,
    ast.Nonlocal, ast.Try, ast.With, ast.AsyncWith, ast.Await, ast.Yield, ast.YieldFrom, ast.ListComp, ast.SetComp,
    ast.DictComp, ast.GeneratorExp, ast.NamedExpr, ast.Starred, ast.Delete, ast.Raise, ast.Set, ast.Dict,
    ast.AsyncFor, *([ast.TryStar] if hasattr(ast, "TryStar") else []), *([ast.Match] if hasattr(ast, "Match") else []),
)


class IllegalKernel(ProgramError):
    """A kernel that is not (only) Triton: the candidate tried to run its own Python in a trusted process."""


def _module(name: str) -> types.ModuleType:
    import importlib

    if name not in ALLOWED_MODULES:
        raise IllegalKernel(f"module {name!r} is not one a Triton kernel may use")
    try:
        return importlib.import_module(name)
    except ImportError:
        raise IllegalKernel(f"module {name!r} does not exist in this Triton") from None


def _origin(value) -> str:
    """The module that defined `value` (for Triton's own @jit functions, the function they wrap: under the
    interpreter the wrapper's class lives elsewhere)."""
    inner = getattr(value, "fn", None)
    return getattr(inner, "__module__", None) or getattr(value, "__module__", None) or ""


def _is_triton_object(value) -> bool:
    import triton.language as tl

    if isinstance(value, (tl.dtype, tl.constexpr)):
        return True
    module = _origin(value)
    return module == "triton.language" or module.startswith("triton.language.") or module == "math" or (
        isinstance(value, float) and module == "")


def _attribute_chain(node: ast.Attribute) -> tuple[ast.expr, list[str]]:
    names = []
    while isinstance(node, ast.Attribute):
        names.append(node.attr)
        node = node.value
    return node, names[::-1]


class _KernelChecker(ast.NodeVisitor):
    def __init__(self, kernel: str, params: set[str], local_names: set[str], modules: dict[str, str],
                 others: set[str]):
        self.kernel = kernel
        self.params = params
        self.locals = local_names
        self.modules = modules  # alias -> module name
        self.others = others  # other declared globals (kernels, constants, dtypes)

    def fail(self, node: ast.AST, message: str) -> None:
        raise IllegalKernel(f"kernel {self.kernel}, line {getattr(node, 'lineno', '?')}: {message}")

    def generic_visit(self, node):
        if isinstance(node, _FORBIDDEN_NODES):
            self.fail(node, f"{type(node).__name__} is not Triton")
        super().generic_visit(node)

    def visit_Name(self, node: ast.Name) -> None:
        name = node.id
        if name in self.modules and name not in self.params | self.locals:
            self.fail(node, f"the module {name!r} used as a value (a module is only ever the root of an attribute)")
        if isinstance(node.ctx, ast.Load) and not (name in self.params or name in self.locals or name in self.modules
                                                   or name in self.others or name in ALLOWED_BUILTINS):
            self.fail(node, f"the name {name!r} is neither a parameter, a local, a declared global nor a builtin "
                            "Triton knows")
        if name.startswith("__"):
            self.fail(node, f"the name {name!r}")

    def visit_Attribute(self, node: ast.Attribute) -> None:
        if not isinstance(node.ctx, ast.Load):
            self.fail(node, "an attribute assignment")
        root, names = _attribute_chain(node)
        for attr in names:
            if attr.startswith("_"):
                self.fail(node, f"the attribute {attr!r} (a kernel reads no private or special attribute)")
        if isinstance(root, ast.Name) and root.id in self.modules and root.id not in self.params | self.locals:
            self._module_chain(node, self.modules[root.id], names)
            return  # the chain is checked whole; its root is a declared module
        for attr in names:
            if attr not in _value_attributes():
                self.fail(node, f"the attribute {attr!r}, which no Triton value has")
        self.visit(root)

    def visit_Subscript(self, node: ast.Subscript) -> None:
        if not isinstance(node.ctx, ast.Load):
            self.fail(node, "an item assignment")
        self.generic_visit(node)

    def visit_Constant(self, node: ast.Constant) -> None:
        if isinstance(node.value, (str, bytes)) and ("\n" in str(node.value) or "\r" in str(node.value)):
            self.fail(node, "a string with a line break")

    def _module_chain(self, node: ast.AST, module_name: str, names: list[str]) -> None:
        value: object = _module(module_name)
        for index, attr in enumerate(names):
            if isinstance(value, types.ModuleType):
                if value.__name__ == "triton" and attr not in TRITON_ROOT_NAMES:
                    self.fail(node, f"triton.{attr} is not part of Triton's language")
                if not hasattr(value, attr):
                    self.fail(node, f"{value.__name__} has no {attr!r}")
                value = getattr(value, attr)
                if isinstance(value, types.ModuleType):
                    if value.__name__ not in ALLOWED_MODULES:
                        self.fail(node, f"module {value.__name__} is not one a Triton kernel may use")
                elif not (_is_triton_object(value) or _is_language_callable(value)):
                    self.fail(node, f"{'.'.join(names[:index + 1])} is not part of Triton's language")
            else:
                import triton.language as tl

                if not isinstance(value, tl.dtype):
                    self.fail(node, f"an attribute of {'.'.join(names[:index])}")
                value = getattr(value, attr, None)


_VALUE_ATTRIBUTES: set[str] = set()


def _value_attributes() -> set[str]:
    """Public attributes of Triton's own value classes (tensors, dtypes, constexprs): `x.to`, `x.dtype`,
    `p.dtype.element_ty`. A kernel's runtime values are only ever these, as no module can be a value."""
    if not _VALUE_ATTRIBUTES:
        import triton.language as tl

        classes = [tl.tensor, tl.dtype, tl.constexpr, tl.pointer_type, tl.block_type]
        _VALUE_ATTRIBUTES.update(n for cls in classes for n in dir(cls) if not n.startswith("_"))
        # and what their instances hold (x.dtype, p.dtype.element_ty, c.value), never a tensor's IR `handle`
        # (under the interpreter a NumPy array of the values, with raw addresses behind it)
        instances = [tl.float32, tl.pointer_type(tl.float32), tl.block_type(tl.float32, [1]), tl.constexpr(1),
                     tl.tensor(None, tl.float32)]
        _VALUE_ATTRIBUTES.update(n for value in instances for n in vars(value) if not n.startswith("_"))
        _VALUE_ATTRIBUTES.discard("handle")
    return _VALUE_ATTRIBUTES


def _is_language_callable(value) -> bool:
    module = _origin(value)
    return module.startswith("triton.language") or module == "math" or (
        module == "triton.runtime.jit" and getattr(value, "__name__", "") in ("cdiv", "next_power_of_2"))


def _bound_names(function: ast.FunctionDef) -> tuple[set[str], set[str]]:
    params = {a.arg for a in [*function.args.posonlyargs, *function.args.args, *function.args.kwonlyargs]}
    if function.args.vararg or function.args.kwarg:
        raise IllegalKernel(f"kernel {function.name}: *args and **kwargs are not Triton")
    local_names = set()
    for node in ast.walk(function):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            local_names.add(node.id)
    return params, local_names


def _check_signature(checker: _KernelChecker, function: ast.FunctionDef) -> None:
    for default in [*function.args.defaults, *function.args.kw_defaults]:
        if default is None:
            continue
        if not _constant_expression(default):
            checker.fail(default, "a default that is not a constant")
        checker.visit(default)
    for arg in [*function.args.posonlyargs, *function.args.args, *function.args.kwonlyargs]:
        if arg.arg in triton_option_names():
            checker.fail(arg, f"a parameter named {arg.arg!r}, one of Triton's launch or compile options (a launch "
                              "passing it would set that option)")
        if arg.annotation is not None:
            if not isinstance(arg.annotation, (ast.Attribute, ast.Name, ast.Constant)):
                checker.fail(arg.annotation, "an annotation that is not a name")
            checker.visit(arg.annotation)
    if function.returns is not None:
        checker.fail(function.returns, "a return annotation")


def _constant_expression(node: ast.expr) -> bool:
    if isinstance(node, ast.Constant):
        return True
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        return _constant_expression(node.operand)
    return isinstance(node, (ast.Attribute, ast.Name))


def check_kernels(kernels: dict) -> dict[str, str]:
    """Every kernel of a program (already structurally checked) is legal Triton; IllegalKernel if not.
    Returns each kernel's source as written from its checked tree (what the executor compiles)."""
    bindings: dict[str, dict] = {}
    checked: dict[str, str] = {}
    for name, kernel in kernels.items():
        try:
            tree = ast_parse.parse(kernel["source"])
        except SyntaxError as exc:
            raise IllegalKernel(f"kernel {name}: the source does not parse: {exc}") from None
        if len(tree.body) != 1 or not isinstance(tree.body[0], ast.FunctionDef):
            raise IllegalKernel(f"kernel {name}: the source must be exactly one function definition")
        function = tree.body[0]
        if function.name != name or function.decorator_list:
            raise IllegalKernel(f"kernel {name}: the definition must be `def {name}(...)` without decorators")
        modules, others = {}, set()
        for alias, value in kernel["globals"].items():
            kind, held = next(iter(value.items()))
            if alias in bindings and bindings[alias] != value:
                raise IllegalKernel(f"the global {alias!r} means different things in different kernels")
            if alias in kernels and value != {"kernel": alias}:
                raise IllegalKernel(f"the global {alias!r} is also a kernel's name")
            bindings[alias] = value
            if kind == "module":
                _module(held)
                modules[alias] = held
            else:
                if kind == "dtype":
                    dtype_named(held)
                others.add(alias)
        params, local_names = _bound_names(function)
        checker = _KernelChecker(name, params, local_names, modules, others)
        _check_signature(checker, function)
        function.body = _without_docstring(function.body)  # never compiled, never written
        for statement in function.body:
            checker.visit(statement)
        checked[name] = _unparsed(function)
    return checked


def _without_docstring(body: list[ast.stmt]) -> list[ast.stmt]:
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
            and isinstance(body[0].value.value, str):
        return body[1:] or [ast.Pass()]
    return body


def _unparsed(function: ast.FunctionDef) -> str:
    """The checked definition as source (its docstring already dropped: the only multi-line string unparse
    would write)."""
    clean = ast.FunctionDef(name=function.name, args=function.args, body=function.body, decorator_list=[],
                            returns=None, type_comment=None)
    return ast.unparse(ast.fix_missing_locations(ast.Module([clean], type_ignores=[])))


def dtype_named(name: str):
    import triton.language as tl

    for attr in dir(tl):
        value = getattr(tl, attr)
        if isinstance(value, tl.dtype) and value.name == name:
            return attr
    raise IllegalKernel(f"no Triton dtype named {name!r}")


def _literal(value) -> str:
    if isinstance(value, float) and not math.isfinite(value):
        return f"float({str(value)!r})"
    return repr(value)


def module_source(kernels: dict, checked: dict[str, str]) -> str:
    """The module the executor imports: imports and constants it spells itself, then each checked kernel as
    written from its checked tree (`checked`, from check_kernels)."""
    lines = ["import triton", "import triton.language", ""]
    constants, aliases = [], []  # before the kernels (defaults may name them), after them (they name kernels)
    seen = set()
    for kernel in kernels.values():
        for alias, value in sorted(kernel["globals"].items()):
            if alias in seen:
                continue
            seen.add(alias)
            kind, held = next(iter(value.items()))
            if kind == "module":
                lines.append(f"import {held} as {alias}" if "." in held or held != alias else f"import {held}")
            elif kind == "value":
                constants.append(f"{alias} = {_literal(held)}")
            elif kind == "constexpr":
                constants.append(f"{alias} = triton.language.constexpr({_literal(held)})")
            elif kind == "dtype":
                constants.append(f"{alias} = triton.language.{dtype_named(held)}")
            elif alias != held:
                aliases.append(f"{alias} = {held}")
    lines += ["", *constants, ""]
    for name in kernels:
        lines += ["", "@triton.jit", checked[name].rstrip(), ""]
    lines += aliases
    return "\n".join(lines) + "\n"


def load_kernels(kernels: dict, folder: Path, stem: str):
    """Check, write and import the program's kernels; returns the module (its attributes are the kernels)."""
    from sandbox_service.worker import harness

    checked = check_kernels(kernels)
    path = folder / f"{stem}.py"
    path.write_text(module_source(kernels, checked))
    return harness.load_module(path, stem)
