"""Abstract values of the static analysis: what a name may hold, without running anything.

A value is a frozenset of atoms (a may-union: the name holds one of them); the empty set means
"unknown". Atoms distinguish tensors (and which of them are forward's inputs) from Python scalars,
shapes and identity keys, and name the things a call can reach: imported objects (`Ref`), the
candidate's own functions, kernels, classes and instances.
"""

from __future__ import annotations

import ast
import dataclasses
import enum
from collections.abc import Iterable


class Kind(enum.Enum):
    TENSOR = "tensor"  # a tensor made on the forward path (allocation, torch result, parameter)
    INPUT = "input"  # one of forward's input tensors, or a view of one
    SCALAR = "scalar"  # ints, floats, strings, shapes, dtypes, devices
    IDENT = "ident"  # derived from object identity: id(), data_ptr(), hash()
    NONE = "none"


class Ctx(enum.Enum):
    """Where the code being analysed runs, which decides the rules that apply."""

    MODULE = "module"  # module level, at import
    INIT = "init"  # ModelNew construction and what it calls
    FORWARD = "forward"  # ModelNew.forward and what it calls
    OTHER = "other"  # code not reached from forward or __init__
    KERNEL = "kernel"  # a @triton.jit body


Value = frozenset
EMPTY: Value = frozenset()
TENSOR: Value = frozenset({Kind.TENSOR})
INPUT: Value = frozenset({Kind.INPUT})
SCALAR: Value = frozenset({Kind.SCALAR})
IDENT: Value = frozenset({Kind.IDENT})
NONE: Value = frozenset({Kind.NONE})


@dataclasses.dataclass(frozen=True)
class Ref:
    """Something reached through an import: a module, function, class or constant, by qualified name."""

    path: str


@dataclasses.dataclass(frozen=True)
class Member:
    """An attribute of a value whose type is unknown (kept for its name: `.matmul` is telling)."""

    name: str


class Env:
    """One scope: a function's locals (parent = the enclosing scope) or the module's globals."""

    def __init__(self, parent: Env | None = None) -> None:
        self.vars: dict[str, Value] = {}
        self.parent = parent
        self.globals: set[str] = set()
        self.class_body = False  # a class body's names are not visible to its methods

    def lookup(self, name: str) -> Value | None:
        env: Env | None = self
        while env is not None:
            if name in env.vars:
                return env.vars[name]
            env = env.parent
        return None


@dataclasses.dataclass(eq=False)
class Func:
    """A function, method or lambda of the candidate, with the scope it closes over."""

    node: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda
    closure: Env
    owner: ClassInfo | None = None
    binding: str = "function"  # function | method | static | class | property
    cached: bool = False  # wrapped in functools.lru_cache / cache
    defaults: dict[str, Value] = dataclasses.field(default_factory=dict)  # evaluated where defined

    @property
    def name(self) -> str:
        return getattr(self.node, "name", "<lambda>")


@dataclasses.dataclass(eq=False)
class Kernel:
    """A @triton.jit (or autotuned) function."""

    name: str


@dataclasses.dataclass(frozen=True)
class Launcher:
    """`kernel[grid]` or `kernel.run`: calling it launches the kernel."""

    kernel: Kernel


@dataclasses.dataclass(frozen=True)
class Bound:
    """A method bound to its receiver."""

    func: Func
    receiver: Value


@dataclasses.dataclass(eq=False)
class ClassInfo:
    """A class defined in the candidate module."""

    name: str
    node: ast.ClassDef
    bases: list[Value]
    body: dict[str, Value] = dataclasses.field(default_factory=dict)  # class attributes and methods
    attrs: dict[str, Value] = dataclasses.field(default_factory=dict)  # self.<name> = ... anywhere

    def mro(self) -> list[ClassInfo]:
        order: list[ClassInfo] = []
        stack = [self]
        while stack:
            cls = stack.pop(0)
            if cls in order:
                continue
            order.append(cls)
            stack.extend(atom for base in cls.bases for atom in base if isinstance(atom, ClassInfo))
        return order

    def foreign_bases(self) -> list[str]:
        """Qualified names of the imported classes this class derives from, directly or through local bases."""
        return [atom.path for cls in self.mro() for base in cls.bases for atom in base if isinstance(atom, Ref)]

    def lookup(self, name: str) -> tuple[ClassInfo, Value] | None:
        for cls in self.mro():
            if name in cls.body:
                return cls, cls.body[name]
        return None

    def instance_attr(self, name: str) -> Value | None:
        found = [cls.attrs[name] for cls in self.mro() if name in cls.attrs]
        return union(found) if found else None


@dataclasses.dataclass(frozen=True)
class Instance:
    """An instance of a local class (`cls` a ClassInfo) or of an imported one (`cls` a Ref, e.g. nn.Linear)."""

    cls: ClassInfo | Ref
    is_self: bool = False


@dataclasses.dataclass(frozen=True)
class Super:
    """`super()` inside a method of `cls`."""

    cls: ClassInfo
    receiver: Value


@dataclasses.dataclass(frozen=True)
class AutogradApply:
    """`MyFunction.apply` of a torch.autograd.Function subclass: calling it runs MyFunction.forward."""

    cls: ClassInfo


@dataclasses.dataclass(eq=False)
class Container:
    """A list, tuple, dict or set (or nn.ModuleList/Sequential); mutable so that `.append` and item stores count."""

    kind: str  # list | tuple | dict | set
    elements: set = dataclasses.field(default_factory=set)
    items: list[Value] | None = None  # positional elements while known
    callable_chain: bool = False  # nn.Sequential: calling it calls every element

    def add(self, value: Value) -> None:
        self.elements |= value
        self.items = None

    def element(self, index: int | None) -> Value:
        if self.items is not None and index is not None and -len(self.items) <= index < len(self.items):
            return self.items[index]
        return frozenset(self.elements)


@dataclasses.dataclass(frozen=True)
class ContainerMethod:
    container: Container
    name: str


@dataclasses.dataclass(frozen=True)
class TensorMethod:
    """A method of a tensor, before it is called (`x.sum`)."""

    name: str
    receiver: Value


def union(values: Iterable[Value]) -> Value:
    out: set = set()
    for value in values:
        out |= value
    return frozenset(out)


def make_container(kind: str, items: list[Value]) -> Value:
    return frozenset({Container(kind, set(union(items)), list(items))})


def may_tensor(value: Value) -> bool:
    return Kind.TENSOR in value or Kind.INPUT in value


def is_input(value: Value) -> bool:
    return Kind.INPUT in value


def is_unknown(value: Value) -> bool:
    return all(isinstance(atom, Member) for atom in value)


def known_non_tensor(value: Value) -> bool:
    """True when every atom is certainly not a tensor (scalars, None, identity keys, containers)."""
    return bool(value) and all(atom in (Kind.SCALAR, Kind.NONE, Kind.IDENT) or isinstance(atom, Container) for atom in value)


def contains_ident(value: Value, depth: int = 0) -> bool:
    if Kind.IDENT in value:
        return True
    if depth > 3:
        return False
    return any(isinstance(atom, Container) and contains_ident(frozenset(atom.elements), depth + 1) for atom in value)


def tensor_kinds(value: Value) -> Value:
    """The tensor atoms of a value (a view of an input stays an input)."""
    kinds = value & {Kind.TENSOR, Kind.INPUT}
    return kinds or TENSOR


def signature(value: Value, depth: int = 0) -> frozenset:
    """A hashable summary of a value for memoising analyses: containers by kind and content, not identity
    (so that recursion through fresh containers terminates)."""
    out = set()
    for atom in value:
        if isinstance(atom, Container):
            out.add(("container", atom.kind, signature(frozenset(atom.elements), depth + 1) if depth < 2 else None))
        else:
            out.add(atom)
    return frozenset(out)


def element_of(value: Value) -> Value:
    """What iterating over / unpacking a value yields."""
    out: set = set()
    for atom in value:
        if atom in (Kind.TENSOR, Kind.INPUT, Kind.SCALAR):
            out.add(atom)
        elif atom is Kind.IDENT:
            out.add(Kind.SCALAR)
        elif isinstance(atom, Container):
            out |= atom.elements
    return frozenset(out)
