"""The abstract interpreter: walks statements and expressions, tracks what names may hold, and reports.

It never executes the candidate. Every function is analysed in a context (`Ctx`): the rules on
torch compute, fallbacks, caches and input mutation apply where the code runs as part of
`ModelNew.forward`; the escape and tampering rules apply everywhere. What a call does is decided in
`calls.py`; which functions are analysed, and how, in `program.py`.
"""

from __future__ import annotations

import ast
import builtins
import dataclasses
import string

from sandbox_service.results import Violation
from sandbox_service.verifier.static import allowlist, catalog
from sandbox_service.verifier.static.values import (
    EMPTY, IDENT, NONE, SCALAR, TENSOR, AutogradApply, Bound, ClassInfo, Container, ContainerMethod, Ctx, Env,
    Func, Instance, Kernel, Kind, Launcher, Member, Ref, Super, TensorMethod, Value, contains_ident, element_of,
    known_non_tensor, make_container, may_tensor, union,
)

LAYER = "static"
FORMAT_METHODS = frozenset({"format", "format_map"})
_BUILTINS = frozenset(dir(builtins))
# Python operators by AST node type, for messages.
_OP_NAMES = {
    ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.FloorDiv: "//", ast.Mod: "%", ast.Pow: "**",
    ast.MatMult: "@", ast.LShift: "<<", ast.RShift: ">>", ast.BitAnd: "&", ast.BitOr: "|", ast.BitXor: "^",
    ast.USub: "-", ast.UAdd: "+", ast.Invert: "~", ast.Eq: "==", ast.NotEq: "!=", ast.Lt: "<", ast.LtE: "<=",
    ast.Gt: ">", ast.GtE: ">=",
}


class AnalysisBudgetExceeded(Exception):
    """The candidate needs more function analyses than the budget allows (pathological input)."""


@dataclasses.dataclass
class Frame:
    ctx: Ctx
    env: Env
    cls: ClassInfo | None = None  # the class whose method this is (for super())
    receiver: Value | None = None  # the method's self (for super())
    returns: set = dataclasses.field(default_factory=set)


class Interpreter:
    """Statements and expressions. Calls (`eval_call`, `call_atom`, `call_func`) are CallRules' (calls.py),
    its subclass; `Program` (program.py) drives the passes."""

    MAX_ANALYSES = 4000

    def __init__(self) -> None:
        self.module_env = Env()
        self.star_modules: list[str] = []
        self.classes: list[ClassInfo] = []
        self.functions: list[Func] = []
        self.analysed: set[int] = set()  # id(func.node) of every function whose body ran
        self.memo: dict = {}
        self.active: set = set()
        self.analyses = 0
        self.launches = 0  # definite Triton launches seen on the forward path
        self.possible_launches = 0  # calls that may launch a kernel (unknown callee given a kernel, x[grid](...))
        self.found: dict[tuple[str, int], Violation] = {}

    # --- reporting ----------------------------------------------------------------------------------------
    def flag(self, rule: str, node: ast.AST, message: str) -> None:
        line = getattr(node, "lineno", 0) or 0
        self.found.setdefault((rule, line), Violation(layer=LAYER, rule=rule, message=message, line=line))

    # --- names --------------------------------------------------------------------------------------------
    def ref(self, path: str, node: ast.AST, frame: Frame) -> Value:
        """A Ref to `path`, checked against the deny lists and then the allow-list as it is created (a reference
        is enough)."""
        normalised = catalog.normalise_nn_path(path)
        denied = False
        for candidate in {path, normalised}:
            match = catalog.deny_match(candidate)
            if match:
                rule, reason = match
                self.flag(rule, node, f"uses {path}: {reason}")
                denied = True
                break
        rng = catalog.rng_match(path)
        if frame.ctx in (Ctx.FORWARD, Ctx.INIT) and rng:
            self.flag("rng-manipulation", node, f"uses {path} in {frame.ctx.value}: reseeding or reading the RNG state can predict the evaluation's inputs")
        if not (denied or rng):
            problem = allowlist.attribute_problem(normalised)
            if problem:
                self.flag("module-attribute", node, problem)
        if frame.ctx is Ctx.KERNEL and (path == "torch" or path.startswith("torch.")):
            self.flag("python-in-kernel", node, f"a @triton.jit body uses {path}: it can only run as Python under the interpreter")
        return frozenset({Ref(path)})

    def load_name(self, name: str, node: ast.AST, frame: Frame) -> Value:
        if allowlist.is_dunder(name) and name not in allowlist.ALLOWED_DUNDER_NAMES and not (
            name in _BUILTINS and catalog.deny_match(f"builtins.{name}")
        ):
            self.flag("dunder-access", node, f"uses {name}: only {', '.join(sorted(allowlist.ALLOWED_DUNDER_NAMES))} are allowed")
            return EMPTY
        value = self.module_env.lookup(name) if name in frame.env.globals else frame.env.lookup(name)
        if value is None:
            value = self.module_env.lookup(name)
        if value is not None:
            return value
        if name in _BUILTINS:
            return self.ref(f"builtins.{name}", node, frame)
        if self.star_modules:
            return union(self.ref(f"{module}.{name}", node, frame) for module in self.star_modules)
        return EMPTY

    def is_module_global(self, name: str, frame: Frame) -> bool:
        if name in frame.env.globals:
            return True
        env: Env | None = frame.env
        while env is not None and env is not self.module_env:
            if name in env.vars:
                return False
            env = env.parent
        return name in self.module_env.vars

    def is_persistent(self, node: ast.expr, frame: Frame) -> bool:
        """Whether an expression denotes state that outlives one forward call (a global, self.x, a class attribute)."""
        depth = 0
        while isinstance(node, (ast.Attribute, ast.Subscript)):
            node, depth = node.value, depth + 1
        if not isinstance(node, ast.Name):
            return False
        if self.is_module_global(node.id, frame):
            return frame.ctx is not Ctx.MODULE
        if depth == 0:
            return False
        value = frame.env.lookup(node.id) or EMPTY
        return any((isinstance(a, Instance) and isinstance(a.cls, ClassInfo)) or isinstance(a, ClassInfo) for a in value)

    # --- statements ---------------------------------------------------------------------------------------
    def exec_block(self, stmts: list[ast.stmt], frame: Frame) -> None:
        for stmt in stmts:
            self.exec_stmt(stmt, frame)

    def exec_stmt(self, node: ast.stmt, frame: Frame) -> None:
        method = getattr(self, f"stmt_{type(node).__name__}", None)
        if method is not None:
            method(node, frame)
            return
        # Statements without their own rule: evaluate every expression in them.
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.expr):
                self.eval(child, frame)
            elif isinstance(child, ast.stmt):
                self.exec_stmt(child, frame)

    def stmt_Expr(self, node: ast.Expr, frame: Frame) -> None:
        self.eval(node.value, frame)

    def stmt_Return(self, node: ast.Return, frame: Frame) -> None:
        frame.returns |= self.eval(node.value, frame) if node.value is not None else NONE

    def stmt_Assign(self, node: ast.Assign, frame: Frame) -> None:
        value = self.eval(node.value, frame)
        for target in node.targets:
            self.bind(target, value, frame)

    def stmt_AnnAssign(self, node: ast.AnnAssign, frame: Frame) -> None:
        self.eval(node.annotation, frame)  # module and class annotations run
        if node.value is not None:
            self.bind(node.target, self.eval(node.value, frame), frame)

    def stmt_AugAssign(self, node: ast.AugAssign, frame: Frame) -> None:
        current = self.eval(node.target, frame)
        value = self.eval(node.value, frame)
        if frame.ctx is Ctx.FORWARD and Kind.INPUT in current:
            self.flag("input-mutation", node, f"`{_OP_NAMES.get(type(node.op), '?')}=` updates an input tensor in place")
        result = self.binop(node.op, current, value, node, frame, left_is_str=False)
        self.bind(node.target, result, frame)

    def stmt_Delete(self, node: ast.Delete, frame: Frame) -> None:
        for target in node.targets:
            if isinstance(target, (ast.Attribute, ast.Subscript)):
                base = self.eval(target.value, frame)
                for atom in base:
                    if isinstance(atom, Ref):
                        self.flag("monkeypatch", node, f"deletes from {atom.path}")
                if isinstance(target, ast.Attribute):
                    self.check_attr_name(target.attr, base, target, frame)
                else:
                    self.eval(target.slice, frame)

    def stmt_Global(self, node: ast.Global, frame: Frame) -> None:
        frame.env.globals.update(node.names)

    def stmt_If(self, node: ast.If, frame: Frame) -> None:
        if frame.ctx is Ctx.MODULE and _is_main_guard(node.test):
            return  # `if __name__ == "__main__":` never runs when the evaluator imports the module
        self.eval(node.test, frame)
        self.branches(frame, [node.body, node.orelse])

    def stmt_For(self, node: ast.For | ast.AsyncFor, frame: Frame) -> None:
        items = element_of(self.eval(node.iter, frame))
        start = dict(frame.env.vars)
        self.bind(node.target, items, frame)
        self.exec_block(node.body + node.orelse, frame)
        looped = frame.env.vars
        frame.env.vars = dict(start)
        self.exec_block(node.orelse, frame)  # the loop may not run at all
        frame.env.vars = _merge([looped, frame.env.vars])

    stmt_AsyncFor = stmt_For

    def stmt_While(self, node: ast.While, frame: Frame) -> None:
        self.eval(node.test, frame)
        self.branches(frame, [node.body + node.orelse, []])

    def stmt_With(self, node: ast.With | ast.AsyncWith, frame: Frame) -> None:
        for item in node.items:
            value = self.eval(item.context_expr, frame)
            if item.optional_vars is not None:
                self.bind(item.optional_vars, value, frame)
        self.exec_block(node.body, frame)

    stmt_AsyncWith = stmt_With

    def stmt_Try(self, node: ast.Try, frame: Frame) -> None:
        if frame.ctx is Ctx.FORWARD and node.handlers and not all(_reraises(h) for h in node.handlers):
            self.flag("exception-fallback", node, "try/except on the forward path: a failing kernel can fall back to other code")
        paths = [node.body + node.orelse]
        for handler in node.handlers:
            if handler.type is not None:
                self.eval(handler.type, frame)
            if handler.name:
                frame.env.vars[handler.name] = EMPTY
            paths.append(handler.body)
        self.branches(frame, paths)
        self.exec_block(node.finalbody, frame)

    stmt_TryStar = stmt_Try

    def stmt_Match(self, node: ast.Match, frame: Frame) -> None:
        self.eval(node.subject, frame)
        for case in node.cases:
            self.check_pattern(case.pattern, frame)
            self.eval(case.guard, frame)
        self.branches(frame, [case.body for case in node.cases] + [[]])

    def check_pattern(self, pattern: ast.pattern, frame: Frame) -> None:
        """Patterns run code too: value patterns evaluate names, and a class pattern reads the attributes it
        names (`case object(f_back=caller)` is `getattr(subject, "f_back")`)."""
        for sub in ast.walk(pattern):
            if isinstance(sub, ast.MatchValue):
                self.eval(sub.value, frame)
            elif isinstance(sub, ast.MatchClass):
                self.eval(sub.cls, frame)
                for attr in sub.kwd_attrs:
                    self.check_attr_name(attr, EMPTY, sub, frame)

    def branches(self, frame: Frame, paths: list[list[ast.stmt]]) -> None:
        """Run alternative paths from the same state and keep, for each name, what any path may leave."""
        start = dict(frame.env.vars)
        results = []
        for path in paths:
            frame.env.vars = dict(start)
            self.exec_block(path, frame)
            results.append(frame.env.vars)
        frame.env.vars = _merge(results)

    def stmt_Import(self, node: ast.Import, frame: Frame) -> None:
        for alias in node.names:
            problem = catalog.import_problem(alias.name)
            if problem:
                self.flag("foreign-import", node, problem)
            value = self.ref(alias.name, node, frame)
            if alias.asname:
                self.bind_name(alias.asname, value, frame)
            else:
                top = alias.name.split(".")[0]
                self.bind_name(top, frozenset({Ref(top)}), frame)

    def stmt_ImportFrom(self, node: ast.ImportFrom, frame: Frame) -> None:
        module = node.module or ""
        if node.level:
            self.flag("foreign-import", node, "relative import: the candidate is a single module")
        else:
            problem = catalog.import_problem(module)
            if problem:
                self.flag("foreign-import", node, problem)
        for alias in node.names:
            if alias.name == "*":
                self.ref(module, node, frame)
                self.star_modules.append(module)
                continue
            self.bind_name(alias.asname or alias.name, self.ref(f"{module}.{alias.name}", node, frame), frame)

    def stmt_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef, frame: Frame) -> None:
        is_kernel, cached, binding = False, False, "function"
        wrappers: list[tuple[ast.expr, Value]] = []
        for decorator in node.decorator_list:
            value = self.eval(decorator, frame)
            target = self.eval(decorator.func, frame) if isinstance(decorator, ast.Call) else value
            for atom in target:
                if isinstance(atom, Ref):
                    is_kernel |= atom.path in catalog.TRITON_KERNEL_DECORATORS
                    cached |= atom.path in catalog.CACHE_DECORATORS
                    binding = _BINDING_DECORATORS.get(atom.path, binding)
                elif isinstance(atom, Kernel):
                    is_kernel = True  # a kernel decorated again (e.g. @triton.autotune over @triton.jit)
            if any(isinstance(atom, (Func, Bound, ClassInfo)) for atom in value):
                wrappers.append((decorator, value))
        defaults = self.eval_defaults(node.args, frame)
        self.eval_annotations(node, frame)
        if is_kernel:
            # The body is Triton: tl.* is fine there; only escapes and torch/Python use are looked for.
            kernel_frame = Frame(Ctx.KERNEL, Env(frame.env))
            spec = node.args
            for param in spec.posonlyargs + spec.args + spec.kwonlyargs + [p for p in (spec.vararg, spec.kwarg) if p]:
                kernel_frame.env.vars[param.arg] = EMPTY
            self.analysed.add(id(node))
            self.exec_block(node.body, kernel_frame)
            self.bind_name(node.name, frozenset({Kernel(node.name)}), frame)
            return
        in_class = _in_class_body(frame)
        if in_class:
            # Methods do not see the class body's names: they close over the scope around the class.
            func = Func(node, frame.env.parent or self.module_env, owner=frame.cls,
                        binding="method" if binding == "function" else binding, cached=cached, defaults=defaults)
        else:
            func = Func(node, frame.env, cached=cached, defaults=defaults)
        self.functions.append(func)
        value: Value = frozenset({func})
        for decorator, wrapper in reversed(wrappers):
            # A decorator of the candidate's own replaces the function with whatever it returns.
            wrapped = union(self.call_atom(a, call_at(decorator), [value], {}, frame) for a in wrapper if isinstance(a, (Func, Bound, ClassInfo)))
            value = wrapped or value
        self.bind_name(node.name, value, frame)
        if frame.ctx is not Ctx.MODULE and not in_class:
            # A nested function: analyse it where it is defined too, for what it closes over.
            self.call_func(func, None, [], {}, node, frame)

    stmt_AsyncFunctionDef = stmt_FunctionDef

    def stmt_ClassDef(self, node: ast.ClassDef, frame: Frame) -> None:
        for decorator in node.decorator_list:
            self.eval(decorator, frame)
        bases = [self.eval(base, frame) for base in node.bases]
        keywords = {keyword.arg: self.eval(keyword.value, frame) for keyword in node.keywords}
        info = ClassInfo(node.name, node, bases)
        self.classes.append(info)
        if _tensor_subclass(info):
            self.flag("tensor-subclass", node, f"class {node.name} subclasses a tensor type")
        body_env = Env(frame.env)
        body_env.class_body = True
        body_frame = Frame(frame.ctx, body_env, cls=info)
        self.exec_block(node.body, body_frame)
        info.body = body_env.vars
        for value in info.body.values():
            for atom in value:
                if isinstance(atom, Func) and isinstance(atom.node, ast.Lambda) and atom.owner is None:
                    atom.owner, atom.binding = info, "method"  # `forward = lambda self, x: ...`
        for name in catalog.TENSOR_PROTOCOL_METHODS & set(info.body):
            self.flag("tensor-subclass", node, f"class {node.name} defines {name}: it can compute inside the comparison")
        if "__getattribute__" in info.body:
            self.flag("forward-rebinding", node, f"class {node.name} overrides __getattribute__: any attribute, forward included, can be swapped")
        if "metaclass" in keywords and not any(isinstance(a, Ref) and a.path.startswith("abc.") for a in keywords["metaclass"]):
            self.flag("forward-rebinding", node, f"class {node.name} has a custom metaclass: construction can return another object")
        self.bind_name(node.name, frozenset({info}), frame)

    # --- binding ------------------------------------------------------------------------------------------
    def bind_name(self, name: str, value: Value, frame: Frame) -> None:
        if name in frame.env.globals:
            self.module_env.vars[name] = self.module_env.vars.get(name, EMPTY) | value
        else:
            frame.env.vars[name] = value

    def bind(self, target: ast.expr, value: Value, frame: Frame) -> None:
        if isinstance(target, ast.Name):
            if frame.ctx is Ctx.FORWARD and target.id in frame.env.globals and contains_ident(value):
                self.flag("identity-cache", target, f"stores an identity key in the global {target.id}")
            self.bind_name(target.id, value, frame)
        elif isinstance(target, (ast.Tuple, ast.List)):
            self.bind_sequence(target.elts, value, frame)
        elif isinstance(target, ast.Starred):
            self.bind(target.value, make_container("list", [element_of(value)]), frame)
        elif isinstance(target, ast.Attribute):
            self.store_attribute(target, value, frame)
        elif isinstance(target, ast.Subscript):
            self.store_item(target, value, frame)

    def bind_sequence(self, targets: list[ast.expr], value: Value, frame: Frame) -> None:
        containers = [a for a in value if isinstance(a, Container) and a.items is not None and len(a.items) == len(targets)]
        starred = any(isinstance(t, ast.Starred) for t in targets)
        if len(value) == 1 and containers and not starred:
            for target, item in zip(targets, containers[0].items):
                self.bind(target, item, frame)
            return
        for target in targets:
            self.bind(target, element_of(value), frame)

    def store_attribute(self, target: ast.Attribute, value: Value, frame: Frame) -> None:
        base = self.eval(target.value, frame)
        self.check_attr_name(target.attr, base, target, frame)
        self.store_attr_value(base, target.attr, value, target, frame)

    def store_attr_value(self, base: Value, attr: str, value: Value, target: ast.AST, frame: Frame) -> None:
        """`base.attr = value` (or setattr with a literal name)."""
        if attr == "__class__":
            self.flag("tensor-subclass", target, "assigns __class__: the object becomes another type")
        for atom in base:
            if isinstance(atom, Ref):
                self.store_on_ref(atom.path, attr, target, frame)
            elif isinstance(atom, Instance) and isinstance(atom.cls, ClassInfo):
                if attr in ("forward", "__call__"):
                    self.flag("forward-rebinding", target, f"assigns {attr} on an instance: the module's call path is replaced")
                atom.cls.attrs[attr] = atom.cls.attrs.get(attr, EMPTY) | value
                if frame.ctx is Ctx.FORWARD and contains_ident(value):
                    self.flag("identity-cache", target, f"stores an identity key in self.{attr}")
            elif isinstance(atom, ClassInfo):
                if attr in ("forward", "__call__"):
                    self.flag("forward-rebinding", target, f"assigns {atom.name}.{attr}: the module's call path is replaced")
                atom.body[attr] = atom.body.get(attr, EMPTY) | value
            elif atom is Kind.INPUT and frame.ctx is Ctx.FORWARD:
                self.flag("input-mutation", target, f"assigns .{attr} of an input tensor")

    def store_on_ref(self, path: str, attr: str, node: ast.AST, frame: Frame) -> None:
        if path == "torch.backends" or path.startswith("torch.backends."):
            if any(word in attr for word in ("tf32", "precision", "reduced")):
                self.flag("precision-downgrade", node, f"sets {path}.{attr}: lower-precision math for everything after")
                return
        self.flag("monkeypatch", node, f"assigns {path}.{attr}: patches an imported module or class")

    def store_item(self, target: ast.Subscript, value: Value, frame: Frame) -> None:
        self.check_namespace_lookup(target.value, target.slice, target)
        base = self.eval(target.value, frame)
        index = self.eval(target.slice, frame)
        forward = frame.ctx is Ctx.FORWARD
        for atom in base:
            if isinstance(atom, Ref):
                self.flag("monkeypatch", target, f"writes into {atom.path}[...]: patches an imported module's state")
            elif isinstance(atom, Container):
                atom.add(value)
                if forward and may_tensor(index) and atom.kind in ("dict", "set"):
                    self.flag("identity-cache", target, "uses a tensor as a dict key (tensors hash by identity)")
        if forward and contains_ident(index):
            self.flag("identity-cache", target, "stores under an identity key (id(), data_ptr(), hash())")
        if forward and Kind.INPUT in base:
            self.flag("input-mutation", target, "assigns into an input tensor")
        if forward and may_tensor(base) and may_tensor(index):
            self.flag("tensor-operator", target, "scatters into a tensor with a tensor index")

    # --- expressions --------------------------------------------------------------------------------------
    def eval(self, node: ast.expr | None, frame: Frame) -> Value:
        if node is None:
            return EMPTY
        method = getattr(self, f"expr_{type(node).__name__}", None)
        if method is not None:
            return method(node, frame)
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.expr):
                self.eval(child, frame)
        return EMPTY

    def expr_Constant(self, node: ast.Constant, frame: Frame) -> Value:
        return NONE if node.value is None else SCALAR

    def expr_Name(self, node: ast.Name, frame: Frame) -> Value:
        return self.load_name(node.id, node, frame)

    def expr_NamedExpr(self, node: ast.NamedExpr, frame: Frame) -> Value:
        value = self.eval(node.value, frame)
        self.bind(node.target, value, frame)
        return value

    def expr_Attribute(self, node: ast.Attribute, frame: Frame) -> Value:
        base = self.eval(node.value, frame)
        self.check_attr_name(node.attr, base, node, frame)
        if node.attr in FORMAT_METHODS:
            self.check_format(node.attr, node.value, base, node)  # a bound .format used as a value
        if not base:
            return IDENT if node.attr == "_cdata" else frozenset({Member(node.attr)})
        return union(self.attribute_of(atom, node.attr, node, frame) for atom in base)

    def check_attr_name(self, attr: str, base: Value, node: ast.AST, frame: Frame) -> None:
        if attr in catalog.FRAME_ATTRS:
            self.flag("frame-introspection", node, f"reads .{attr}: frame, code, closure or traceback internals")
        elif attr in catalog.ESCAPE_DUNDERS:
            self.flag("dunder-access", node, f"reads .{attr}: a sandbox-escape attribute")
        elif attr in catalog.SELF_ONLY_DUNDERS or attr == "__class__":
            if not (base and all(_is_own(atom) for atom in base)):
                self.flag("dunder-access", node, f"uses .{attr} of an object other than self")
        elif allowlist.is_dunder(attr) and attr not in allowlist.ALLOWED_DUNDERS and not _is_operator_dunder(attr):
            self.flag("dunder-access", node, f"uses .{attr}, a dunder outside the allow-list")
        elif attr in catalog.HOOK_ATTRS:
            self.flag("forward-rebinding", node, f"uses .{attr}: the module's hook tables")
        elif attr.startswith("_") and not allowlist.is_dunder(attr) and attr not in allowlist.ALLOWED_PRIVATE and not (
            base and all(_is_candidates(atom) or isinstance(atom, Ref) for atom in base)
        ):
            # Refs are judged by path (torch-private-api, module-attribute); others' internals lead to modules
            # (`warnings.catch_warnings()._module.sys`).
            self.flag("private-attribute", node, f"uses .{attr}, a private attribute of an object that is not the candidate's own")

    def check_format(self, name: str, receiver: ast.expr, base: Value, node: ast.AST, str_template: ast.expr | None = None) -> None:
        """str.format and format_map read the attributes and items their template's fields name
        (`"{0.f_back.f_locals}".format(frame)`): the template must be a literal whose fields are plain.
        `str_template` is the first argument of a call `str.format(template, ...)`."""
        if any(isinstance(a, Ref) and a.path == "builtins.str" for a in base):
            template = str_template
        elif base and not any(a is Kind.SCALAR or isinstance(a, Member) for a in base):
            return  # not a string: an object's own format method
        else:
            template = receiver
        if not (isinstance(template, ast.Constant) and isinstance(template.value, str)) or _template_reads_attributes(template.value):
            self.flag("dynamic-getattr", node, f".{name} with a template that is not a literal or whose fields read attributes or items")

    def attribute_of(self, atom, attr: str, node: ast.AST, frame: Frame) -> Value:
        if isinstance(atom, Ref):
            return self.ref(f"{atom.path}.{attr}", node, frame)
        if atom in (Kind.TENSOR, Kind.INPUT):
            if attr == "_cdata":
                return IDENT
            if attr == "__class__":
                return frozenset({Ref("torch.Tensor")})
            if attr in catalog.TENSOR_SCALAR_ATTRS:
                return SCALAR
            if attr in catalog.TENSOR_TENSOR_ATTRS:
                return frozenset({atom}) if attr != "grad" else TENSOR
            return frozenset({TensorMethod(attr, frozenset({atom}))})
        if atom in (Kind.SCALAR, Kind.IDENT):
            return SCALAR
        if isinstance(atom, Instance):
            return self.instance_attribute(atom, attr, node, frame)
        if isinstance(atom, ClassInfo):
            return self.class_attribute(atom, attr, node, frame)
        if isinstance(atom, Super):
            return self.super_attribute(atom, attr, node, frame)
        if isinstance(atom, Kernel):
            return frozenset({Launcher(atom)}) if attr in ("run", "warmup") else EMPTY
        if isinstance(atom, Container):
            return frozenset({ContainerMethod(atom, attr)})
        return frozenset({Member(attr)})

    def instance_attribute(self, atom: Instance, attr: str, node: ast.AST, frame: Frame) -> Value:
        cls = atom.cls
        if attr == "__class__":
            return frozenset({cls})
        if isinstance(cls, Ref):
            if attr in ("forward", "__call__"):
                return frozenset({Ref(f"{cls.path}.forward")})
            if "weight" in attr or "bias" in attr or attr.startswith("running_"):
                return TENSOR
            if attr in catalog.NN_CONFIG_ATTRS:
                return SCALAR
            return frozenset({Member(attr)})
        receiver = frozenset({atom})
        found = cls.lookup(attr)
        if found is not None:
            return union(
                self.call_func(a, receiver, [], {}, node, frame) if isinstance(a, Func) and a.binding == "property"
                else self.bind_member(a, receiver)
                for a in found[1]
            )
        attrs = cls.instance_attr(attr)
        if attrs is not None:
            return attrs
        getattr_hook = cls.lookup("__getattr__")
        if getattr_hook is not None:
            # Unknown attributes come from the class's own __getattr__.
            return union(self.call_func(a, receiver, [SCALAR], {}, node, frame) for a in getattr_hook[1] if isinstance(a, Func))
        if not attr.startswith("_"):
            # Public API of an imported base (nn.Module.register_forward_hook, .half, ...). Private names are
            # more likely the candidate's own attributes set dynamically.
            for base in cls.foreign_bases():
                return self.ref(f"{catalog.normalise_nn_path(base)}.{attr}", node, frame)
        return frozenset({Member(attr)})

    def bind_member(self, member, receiver: Value) -> Value:
        """A class-body member looked up through an instance: functions become bound methods."""
        if isinstance(member, Func):
            if member.binding == "class":
                owner = frozenset(a.cls for a in receiver if isinstance(a, Instance) and isinstance(a.cls, ClassInfo)) or receiver
                return frozenset({Bound(member, owner)})
            if member.binding != "static":  # any function in a class body becomes a method
                return frozenset({Bound(member, receiver)})
        return frozenset({member})

    def class_attribute(self, cls: ClassInfo, attr: str, node: ast.AST, frame: Frame) -> Value:
        if attr == "forward" and frame.cls is not None and cls is not frame.cls and cls in frame.cls.mro():
            self.flag("reference-delegation", node, f"calls {cls.name}.forward of a base class: the inherited forward does the work")
        found = cls.lookup(attr)
        if found is not None:
            return union(self.bind_member(a, frozenset({cls})) if isinstance(a, Func) and a.binding == "class" else frozenset({a})
                         for a in found[1])
        if attr == "apply" and any(p.startswith("torch.autograd") for p in cls.foreign_bases()):
            return frozenset({AutogradApply(cls)})
        for base in cls.foreign_bases():
            return self.ref(f"{catalog.normalise_nn_path(base)}.{attr}", node, frame)
        return frozenset({Member(attr)})

    def super_attribute(self, atom: Super, attr: str, node: ast.AST, frame: Frame) -> Value:
        if attr == "forward":
            self.flag("reference-delegation", node, "calls super().forward: the parent's forward does the work")
        for cls in atom.cls.mro()[1:]:
            if attr in cls.body:
                return union(self.bind_member(a, atom.receiver) for a in cls.body[attr])
        for base in atom.cls.foreign_bases():
            return self.ref(f"{catalog.normalise_nn_path(base)}.{attr}", node, frame)
        return EMPTY

    def check_namespace_lookup(self, container: ast.expr, key: ast.expr, node: ast.AST) -> None:
        """`obj.__dict__[name]` with a computed name is a computed attribute access, even on self."""
        if isinstance(container, ast.Attribute) and container.attr == "__dict__" and not (
            isinstance(key, ast.Constant) and isinstance(key.value, str)
        ):
            self.flag("dynamic-getattr", node, "looks up __dict__ with a computed attribute name")

    def expr_Subscript(self, node: ast.Subscript, frame: Frame) -> Value:
        self.check_namespace_lookup(node.value, node.slice, node)
        base = self.eval(node.value, frame)
        index = self.eval(node.slice, frame)
        forward = frame.ctx is Ctx.FORWARD
        if forward and contains_ident(index):
            self.flag("identity-cache", node, "looks up by an identity key (id(), data_ptr(), hash())")
        out: set = set()
        constant = node.slice.value if isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, int) else None
        for atom in base:
            if atom in (Kind.TENSOR, Kind.INPUT):
                if may_tensor(index):
                    if forward:
                        self.flag("tensor-operator", node, "indexes a tensor with a tensor (a gather)")
                    out.add(Kind.TENSOR)
                else:
                    out.add(atom)
            elif atom in (Kind.SCALAR, Kind.IDENT):
                out.add(Kind.SCALAR)
            elif isinstance(atom, Container):
                if forward and may_tensor(index) and atom.kind in ("dict", "set"):
                    self.flag("identity-cache", node, "uses a tensor as a dict key (tensors hash by identity)")
                out |= atom.element(constant)
            elif isinstance(atom, Kernel):
                out.add(Launcher(atom))
            elif isinstance(atom, Instance) and isinstance(atom.cls, ClassInfo) and atom.cls.lookup("__getitem__"):
                # An object of the candidate's own that is indexed like a kernel (`fake[grid](...)`) runs its __getitem__.
                getitem = atom.cls.lookup("__getitem__")[1]
                out |= union(self.call_func(a, frozenset({atom}), [index], {}, node, frame) for a in getitem if isinstance(a, Func))
        return frozenset(out)

    def expr_Call(self, node: ast.Call, frame: Frame) -> Value:
        return self.eval_call(node, frame)

    def expr_BinOp(self, node: ast.BinOp, frame: Frame) -> Value:
        left = self.eval(node.left, frame)
        right = self.eval(node.right, frame)
        is_format = isinstance(node.op, ast.Mod) and isinstance(node.left, (ast.Constant, ast.JoinedStr))
        return self.binop(node.op, left, right, node, frame, left_is_str=is_format)

    def binop(self, op: ast.operator, left: Value, right: Value, node: ast.AST, frame: Frame, left_is_str: bool) -> Value:
        symbol = _OP_NAMES.get(type(op), "?")
        tensor = may_tensor(left) or may_tensor(right)
        if isinstance(op, ast.MatMult):
            tensor = tensor or not (known_non_tensor(left) and known_non_tensor(right))
        if tensor and not left_is_str:
            if frame.ctx is Ctx.FORWARD:
                self.flag("tensor-operator", node, f"computes `{symbol}` on tensors")
            return TENSOR
        if (contains_ident(left) or contains_ident(right)) and not isinstance(op, (ast.Mod, ast.BitAnd)):
            return IDENT  # ptr + 1 is still an identity key; ptr % 16 is an alignment check
        containers = [a for a in left | right if isinstance(a, Container)]
        if containers and isinstance(op, (ast.Add, ast.Mult)):
            return make_container("list", [element_of(left | right)])
        if left and right and known_non_tensor(left) and known_non_tensor(right):
            return SCALAR
        return EMPTY

    def expr_UnaryOp(self, node: ast.UnaryOp, frame: Frame) -> Value:
        operand = self.eval(node.operand, frame)
        if isinstance(node.op, ast.Not):
            return SCALAR
        if may_tensor(operand):
            if frame.ctx is Ctx.FORWARD:
                self.flag("tensor-operator", node, f"computes unary `{_OP_NAMES.get(type(node.op), '?')}` on a tensor")
            return TENSOR
        return SCALAR if known_non_tensor(operand) else EMPTY

    def expr_Compare(self, node: ast.Compare, frame: Frame) -> Value:
        values = [self.eval(node.left, frame)] + [self.eval(c, frame) for c in node.comparators]
        nodes = [node.left] + list(node.comparators)
        forward = frame.ctx is Ctx.FORWARD
        result = SCALAR
        for i, op in enumerate(node.ops):
            a, b = values[i], values[i + 1]
            a_node, b_node = nodes[i], nodes[i + 1]
            if isinstance(op, (ast.Is, ast.IsNot)):
                if forward and _is_none(a_node) is False and _is_none(b_node) is False and (
                    (may_tensor(a) and self.is_persistent(b_node, frame)) or (may_tensor(b) and self.is_persistent(a_node, frame))
                ):
                    self.flag("identity-cache", node, "compares an input's identity with stored state (`is`)")
            elif isinstance(op, (ast.In, ast.NotIn)):
                if forward and (contains_ident(a) or (may_tensor(a) and (self.is_persistent(b_node, frame)
                                                                         or any(isinstance(x, Container) for x in b)))):
                    self.flag("identity-cache", node, "tests membership of an identity key or a tensor in a cache")
            else:
                if may_tensor(a) or may_tensor(b):
                    if forward:
                        self.flag("tensor-operator", node, f"compares tensors with `{_OP_NAMES.get(type(op), '?')}`")
                    result = TENSOR
                elif forward and isinstance(op, (ast.Eq, ast.NotEq)) and (
                    (contains_ident(a) and not isinstance(b_node, ast.Constant)) or (contains_ident(b) and not isinstance(a_node, ast.Constant))
                ):
                    self.flag("identity-cache", node, "compares an identity key (id(), data_ptr()) with stored state")
        return result

    def expr_BoolOp(self, node: ast.BoolOp, frame: Frame) -> Value:
        return union(self.eval(v, frame) for v in node.values)

    def expr_IfExp(self, node: ast.IfExp, frame: Frame) -> Value:
        self.eval(node.test, frame)
        return self.eval(node.body, frame) | self.eval(node.orelse, frame)

    def expr_Tuple(self, node: ast.Tuple | ast.List | ast.Set, frame: Frame) -> Value:
        kind = {"Tuple": "tuple", "List": "list", "Set": "set"}[type(node).__name__]
        items = [self.eval(e, frame) for e in node.elts]
        if any(isinstance(e, ast.Starred) for e in node.elts):
            container = Container(kind, set())
            for e, item in zip(node.elts, items):
                container.add(element_of(item) if isinstance(e, ast.Starred) else item)
            return frozenset({container})
        return make_container(kind, items)

    expr_List = expr_Tuple
    expr_Set = expr_Tuple

    def expr_Starred(self, node: ast.Starred, frame: Frame) -> Value:
        return self.eval(node.value, frame)

    def expr_Dict(self, node: ast.Dict, frame: Frame) -> Value:
        container = Container("dict", set())
        for key, value in zip(node.keys, node.values):
            key_value = self.eval(key, frame) if key is not None else EMPTY
            if frame.ctx is Ctx.FORWARD and (contains_ident(key_value) or may_tensor(key_value)):
                self.flag("identity-cache", node, "builds a dict keyed by identity or by tensors")
            item = self.eval(value, frame)
            container.add(element_of(item) if key is None else item)
        return frozenset({container})

    def expr_JoinedStr(self, node: ast.JoinedStr, frame: Frame) -> Value:
        parts = union(self.eval(v, frame) for v in node.values)
        return IDENT if contains_ident(parts) else SCALAR

    def expr_FormattedValue(self, node: ast.FormattedValue, frame: Frame) -> Value:
        value = self.eval(node.value, frame)
        if node.format_spec is not None:
            self.eval(node.format_spec, frame)
        return IDENT if contains_ident(value) else SCALAR

    def expr_Lambda(self, node: ast.Lambda, frame: Frame) -> Value:
        func = Func(node, frame.env, defaults=self.eval_defaults(node.args, frame))
        self.functions.append(func)
        if frame.ctx is not Ctx.MODULE:
            self.call_func(func, None, [], {}, node, frame)
        return frozenset({func})

    def expr_ListComp(self, node: ast.ListComp | ast.SetComp | ast.GeneratorExp, frame: Frame) -> Value:
        inner = self.comprehension_frame(node.generators, frame)
        return make_container("list", [self.eval(node.elt, inner)])

    expr_SetComp = expr_ListComp
    expr_GeneratorExp = expr_ListComp

    def expr_DictComp(self, node: ast.DictComp, frame: Frame) -> Value:
        inner = self.comprehension_frame(node.generators, frame)
        key = self.eval(node.key, inner)
        if frame.ctx is Ctx.FORWARD and (contains_ident(key) or may_tensor(key)):
            self.flag("identity-cache", node, "builds a dict keyed by identity or by tensors")
        container = Container("dict", set())
        container.add(self.eval(node.value, inner))
        return frozenset({container})

    def comprehension_frame(self, generators: list[ast.comprehension], frame: Frame) -> Frame:
        inner = Frame(frame.ctx, Env(frame.env), frame.cls, frame.receiver, frame.returns)
        inner.env.globals = frame.env.globals
        for generator in generators:
            self.bind(generator.target, element_of(self.eval(generator.iter, inner)), inner)
            for condition in generator.ifs:
                self.eval(condition, inner)
        return inner

    def expr_Slice(self, node: ast.Slice, frame: Frame) -> Value:
        parts = [self.eval(p, frame) for p in (node.lower, node.upper, node.step) if p is not None]
        return TENSOR if any(may_tensor(p) for p in parts) else SCALAR

    def expr_Await(self, node: ast.Await, frame: Frame) -> Value:
        return self.eval(node.value, frame)

    def eval_annotations(self, node: ast.FunctionDef | ast.AsyncFunctionDef, frame: Frame) -> None:
        """Annotations run where the function is defined (unless `from __future__ import annotations`; checking
        them anyway costs nothing)."""
        spec = node.args
        for param in spec.posonlyargs + spec.args + spec.kwonlyargs + [p for p in (spec.vararg, spec.kwarg) if p]:
            self.eval(param.annotation, frame)
        self.eval(node.returns, frame)

    def eval_defaults(self, args: ast.arguments, frame: Frame) -> dict[str, Value]:
        """Evaluate default values where the function is defined; the values by parameter name."""
        positional = args.posonlyargs + args.args
        named = list(zip(positional[len(positional) - len(args.defaults):], args.defaults))
        named += [(p, d) for p, d in zip(args.kwonlyargs, args.kw_defaults) if d is not None]
        return {param.arg: self.eval(default, frame) for param, default in named}


def call_at(node: ast.AST) -> ast.Call:
    """A synthetic call located at `node`, for calls the source does not spell out (decorators, forward itself)."""
    return ast.copy_location(ast.Call(func=ast.Constant(None), args=[], keywords=[]), node)


def _merge(states: list[dict[str, Value]]) -> dict[str, Value]:
    merged: dict[str, Value] = {}
    for state in states:
        for name, value in state.items():
            merged[name] = merged.get(name, EMPTY) | value
    return merged


def _is_own(atom) -> bool:
    return (isinstance(atom, Instance) and atom.is_self) or isinstance(atom, Super)


def _template_reads_attributes(template: str) -> bool:
    """Whether a str.format template has a field, or a nested field in a format spec, that reads an attribute
    or an item (`{0.__globals__}`, `{0[key]}`)."""
    try:
        fields = list(string.Formatter().parse(template))
    except ValueError:
        return False  # str.format raises on it: nothing is read
    return any(
        (field is not None and ("." in field or "[" in field)) or (spec and _template_reads_attributes(spec))
        for _, field, spec, _ in fields
    )


def _is_candidates(atom) -> bool:
    """An object the candidate defined: its private attributes are its own."""
    return isinstance(atom, (ClassInfo, Super, Func, Bound)) or (isinstance(atom, Instance) and isinstance(atom.cls, ClassInfo))


def _is_operator_dunder(attr: str) -> bool:
    """`__add__`, `__matmul__`, ...: Python operators spelled as methods, which the tensor rules judge."""
    return attr[2:-2] in catalog.DUNDER_OPERATORS


def _is_none(node: ast.expr) -> bool:
    return isinstance(node, ast.Constant) and node.value is None


def _reraises(handler: ast.ExceptHandler) -> bool:
    """A handler that only adds context and raises again is not a fallback."""
    return bool(handler.body) and isinstance(handler.body[-1], ast.Raise) and not any(
        isinstance(n, ast.Return) for stmt in handler.body for n in ast.walk(stmt)
    )


def _is_main_guard(test: ast.expr) -> bool:
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.Eq)):
        return False
    sides = [test.left, test.comparators[0]]
    return any(isinstance(s, ast.Name) and s.id == "__name__" for s in sides) and any(
        isinstance(s, ast.Constant) and s.value == "__main__" for s in sides
    )


def _in_class_body(frame: Frame) -> bool:
    return frame.env.class_body


_BINDING_DECORATORS = {
    "builtins.staticmethod": "static", "builtins.classmethod": "class", "builtins.property": "property",
    "functools.cached_property": "property",
}
_TENSOR_TYPES = frozenset({"torch.Tensor", "torch._C.TensorBase", "torch._C._TensorBase", "torch.nn.Parameter", "torch.nn.Buffer"})


def _tensor_subclass(info: ClassInfo) -> bool:
    return any(catalog.normalise_nn_path(path) in _TENSOR_TYPES for path in info.foreign_bases())
