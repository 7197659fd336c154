"""The analysis of one candidate module, in passes.

1. The module body runs (imports, aliases, classes, kernels; module-level code is checked as it goes).
2. Every method of every class runs, __init__ as construction and the rest as plain code: this learns
   what `self.<name>` may hold (a kernel, an nn.Linear, a cache) before forward is followed.
3. ModelNew's forward (and __call__) runs as forward, with its parameters bound to input tensors; every
   function, method, class and lambda it reaches is followed with the values it passes.
4. Whatever was never reached runs as plain code, so escapes hidden in dead code are still reported.
"""

from __future__ import annotations

import ast

from sandbox_service.results import Violation
from sandbox_service.verifier.static import catalog
from sandbox_service.verifier.static.calls import CallRules
from sandbox_service.verifier.static.interpreter import Frame, call_at
from sandbox_service.verifier.static.rules import RULES
from sandbox_service.verifier.static.values import INPUT, NONE, SCALAR, Bound, ClassInfo, Ctx, Func, Instance, Ref, Value, union

ENTRY_CLASS = "ModelNew"
_SCALAR_ANNOTATIONS = frozenset({"int", "float", "bool", "str"})


class Program(CallRules):
    def __init__(self, tree: ast.Module, allow_low_precision_casts: bool = False) -> None:
        super().__init__()
        self.tree = tree
        self.allow_low_precision_casts = allow_low_precision_casts

    def run(self) -> list[Violation]:
        self.exec_block(self.tree.body, Frame(Ctx.MODULE, self.module_env))
        for _ in range(2):  # twice: attributes set by one method may be used by another
            self.memo.clear()
            for cls in list(self.classes):
                self.analyse_methods(cls)
        self.memo.clear()
        self.analyse_entry()
        for func in list(self.functions):
            if id(func.node) not in self.analysed:
                self.call_func(func, _receiver(func), [], {}, func.node, Frame(Ctx.OTHER, self.module_env))
        return sorted(self.found.values(), key=lambda v: (v.line or 0, v.rule))

    def analyse_methods(self, cls: ClassInfo) -> None:
        for name, value in cls.body.items():
            for atom in value:
                if isinstance(atom, Func) and atom.owner is cls:
                    ctx = Ctx.INIT if name == "__init__" else Ctx.OTHER
                    self.call_func(atom, _receiver(atom), [], {}, atom.node, Frame(ctx, self.module_env))

    # --- ModelNew ---------------------------------------------------------------------------------------------
    def analyse_entry(self) -> None:
        model = self.module_env.vars.get(ENTRY_CLASS)
        if not model:
            return  # no ModelNew: the format layer reports it
        for atom in model:
            if isinstance(atom, Ref):
                self.flag("reference-delegation", self.binding_node(), f"{ENTRY_CLASS} is imported ({atom.path}): its code is not the candidate's")
            elif isinstance(atom, ClassInfo):
                self.analyse_model(atom)

    def analyse_model(self, info: ClassInfo) -> None:
        self.check_inheritance(info)
        receiver = frozenset({Instance(info, is_self=True)})
        frame = Frame(Ctx.FORWARD, self.module_env, cls=info)
        entry_node: ast.AST = info.node
        found_forward = False
        for name in ("forward", "__call__"):
            found = info.lookup(name)
            # Class members are bound to the instance; `self.forward = ...` in __init__ replaces the method.
            members = union(self.bind_member(a, receiver) for a in found[1]) if found else frozenset()
            members |= info.instance_attr(name) or frozenset()
            if not members:
                continue
            found_forward |= name == "forward"
            for atom in members:
                func = atom.func if isinstance(atom, Bound) else atom
                if isinstance(func, Func):
                    entry_node = func.node if name == "forward" else entry_node
                    arguments = forward_arguments(func, bound=isinstance(atom, Bound))
                    self.call_atom(atom, call_at(func.node), arguments, {}, frame)
                else:
                    self.call_atom(atom, call_at(_member_node(info, name)), [INPUT], {}, frame)
        if not found_forward:
            inherited = [p for p in info.foreign_bases() if catalog.normalise_nn_path(p) != "torch.nn.Module"]
            if inherited:
                self.flag("reference-delegation", info.node, f"{ENTRY_CLASS} inherits forward from {inherited[0]}")
        if self.launches == 0 and self.possible_launches == 0:
            self.flag("no-kernel-launch", entry_node, f"{ENTRY_CLASS}.forward never launches a Triton kernel (kernel[grid](...))")

    def check_inheritance(self, info: ClassInfo) -> None:
        """Subclassing a class whose forward computes in PyTorch (a copy of the reference Model, a torch.nn
        layer, an imported class) delegates to it, whether or not forward is overridden."""
        for cls in info.mro():
            if "__new__" in cls.body:
                self.flag("forward-rebinding", cls.node, f"{cls.name} defines __new__: constructing {info.name} can return another object")
        for base in info.mro()[1:]:
            if "forward" in base.body and self.forward_computes_in_torch(base):
                self.flag("reference-delegation", info.node, f"{info.name} subclasses {base.name}, whose forward computes in PyTorch")
        for path in info.foreign_bases():
            name = catalog.normalise_nn_path(path)
            parts = name.split(".")
            if name == "torch.nn.Module" or (parts[:2] == ["torch", "nn"] and len(parts) == 3 and parts[2] in catalog.NN_NONCOMPUTE):
                continue
            self.flag("reference-delegation", info.node, f"{info.name} subclasses {path}: its forward is not the candidate's")

    def forward_computes_in_torch(self, cls: ClassInfo) -> bool:
        """Analyse cls.forward on its own, without reporting: does it compute in PyTorch? (A base whose forward
        only raises NotImplementedError is a harmless abstract base.)"""
        saved = (self.found, self.launches, self.possible_launches, self.memo)
        self.found, self.memo = {}, {}
        try:
            receiver = frozenset({Instance(cls, is_self=True)})
            frame = Frame(Ctx.FORWARD, self.module_env, cls=cls)
            for atom in cls.body["forward"]:
                for bound in self.bind_member(atom, receiver):
                    if isinstance(bound, Bound):
                        self.call_atom(bound, call_at(bound.func.node), forward_arguments(bound.func, bound=True), {}, frame)
            return any(RULES[rule].strict_only for rule, _ in self.found)
        finally:
            self.found, self.launches, self.possible_launches, self.memo = saved

    def binding_node(self) -> ast.AST:
        for node in ast.walk(self.tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)) and any((a.asname or a.name) == ENTRY_CLASS for a in node.names):
                return node
            if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == ENTRY_CLASS for t in node.targets):
                return node
        return self.tree.body[0] if self.tree.body else self.tree


def forward_arguments(func: Func, bound: bool) -> list[Value]:
    """What forward receives: input tensors, except parameters typed as Python scalars; a parameter with a
    default gets its default (a tensor may still be passed where the default is None)."""
    spec = func.node.args
    params = spec.posonlyargs + spec.args
    if bound:
        params = params[1:]
    values: list[Value] = []
    for param in params:
        annotation = param.annotation
        default = func.defaults.get(param.arg)
        if isinstance(annotation, ast.Name) and annotation.id in _SCALAR_ANNOTATIONS:
            values.append(SCALAR)
        elif default is not None:
            values.append(default | INPUT if default == NONE else default)
        else:
            values.append(INPUT)
    if spec.vararg is not None:
        values.append(INPUT)
    return values


def _receiver(func: Func) -> Value | None:
    """What a method of a local class is called on when analysed on its own."""
    if func.owner is None or func.binding == "static":
        return None
    return frozenset({func.owner}) if func.binding == "class" else frozenset({Instance(func.owner, is_self=True)})


def _member_node(info: ClassInfo, name: str) -> ast.AST:
    """Where a class body binds `name` (e.g. `forward = staticmethod(torch.relu)`), else the class."""
    for cls in info.mro():
        for stmt in cls.node.body:
            if isinstance(stmt, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in stmt.targets):
                return stmt
    return info.node

