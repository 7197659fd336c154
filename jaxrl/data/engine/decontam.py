"""Decontamination of generated tasks against KernelBench (or any list of reference sources).

What counts as the same problem (a task that matches is dropped):

1. **Same normalized program** (matcher "ast-hash"). Parse the source; drop docstrings (comments are not
   in the AST) and type annotations; rename every identifier the module defines (classes, functions,
   arguments, assigned names, module-level constants, `self.<attr>` attributes) to placeholders in order
   of first appearance; replace every numeric literal by one placeholder; hash `ast.dump`. Renaming,
   reformatting, new comments or docstrings and other sizes do not change the hash.
2. **Same operator signature on the same kinds of inputs** (matcher "signature"): `op_signature` (the
   canonical operators of forward, in order) is equal, and `get_inputs()` returns as many values, with
   equal rank and dtype each, as far as they can be read statically (see `input_specs`; a rank or dtype
   that cannot be read matches anything, so unreadable problems err towards being dropped). A ReLU on
   a 2-D float32 tensor is KernelBench's ReLU whatever its sizes or spelling; the same ReLU on a 3-D
   tensor, or in float16, is another problem.

Reported but not dropped: the coarser **op-sequence overlap** (equal signature, any inputs), which shows
how much of the operator vocabulary the two sets share.
"""

from __future__ import annotations

import ast
import dataclasses
import hashlib
from collections.abc import Iterable, Mapping
from typing import Literal

from jaxrl.data.engine.signature import op_signature
from jaxrl.data.engine.tasks import GeneratedTask

NUMBER = "<number>"
FLOAT_DTYPES = {"float32", "float", "float16", "half", "bfloat16", "float64", "double"}
CASTS = {"float": "float32", "half": "float16", "bfloat16": "bfloat16", "double": "float64", "long": "int64",
         "int": "int32", "bool": "bool"}
# torch creation functions: the shape is the positional size arguments (or one tuple of them).
CREATION = {"randn", "rand", "zeros", "ones", "empty", "randn_like", "rand_like", "zeros_like", "ones_like", "full"}
# tensor methods that keep rank and dtype
KEEPS = {"softmax", "log_softmax", "abs", "exp", "sigmoid", "tanh", "relu", "contiguous", "clone", "cuda", "cpu",
         "detach", "requires_grad_", "normal_", "uniform_", "clamp", "sqrt", "neg", "transpose", "permute", "t"}


# ----------------------------------------------------------------------------- 1. normalized AST hash
class _Normalizer(ast.NodeTransformer):
    def __init__(self, defined: set[str], self_attrs: set[str]):
        self.defined = defined
        self.self_attrs = self_attrs
        self.names: dict[str, str] = {}

    def placeholder(self, name: str) -> str:
        if name not in self.names:
            self.names[name] = f"_v{len(self.names)}"
        return self.names[name]

    def _rename(self, name: str) -> str:
        return self.placeholder(name) if name in self.defined else name

    def _strip_docstring(self, node):
        body = node.body
        if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                and isinstance(body[0].value.value, str):
            node.body = body[1:] or [ast.Pass()]
        return node

    def visit_Module(self, node):
        self._strip_docstring(node)
        return self.generic_visit(node)

    def visit_ClassDef(self, node):
        node.name = self._rename(node.name)
        self._strip_docstring(node)
        return self.generic_visit(node)

    def visit_FunctionDef(self, node):
        node.name = self._rename(node.name)
        node.returns = None
        self._strip_docstring(node)
        return self.generic_visit(node)

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_arg(self, node):
        node.arg = self._rename(node.arg)
        node.annotation = None
        return node

    def visit_AnnAssign(self, node):
        if node.value is None:
            return None
        return self.visit(ast.Assign(targets=[node.target], value=node.value))

    def visit_Name(self, node):
        node.id = self._rename(node.id)
        return node

    def visit_Attribute(self, node):
        self.generic_visit(node)
        on_self = isinstance(node.value, ast.Name) and node.value.id == self.names.get("self")
        if on_self and node.attr in self.self_attrs:
            node.attr = self.placeholder("self." + node.attr)
        return node

    def visit_Constant(self, node):
        if isinstance(node.value, (int, float, complex)) and not isinstance(node.value, bool):
            return ast.Constant(value=NUMBER)
        return node


def _defined_names(tree: ast.Module) -> tuple[set[str], set[str]]:
    defined, self_attrs = set(), set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            defined.add(node.name)
        elif isinstance(node, ast.arg):
            defined.add(node.arg)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            defined.add(node.id)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store) and isinstance(node.value, ast.Name) \
                and node.value.id == "self":
            self_attrs.add(node.attr)
    return {n for n in defined if not (n.startswith("__") and n.endswith("__"))}, self_attrs


def normalized_ast_hash(source: str) -> str:
    """SHA-256 of the source's AST with definitions renamed, numbers, docstrings and annotations erased."""
    tree = ast.parse(source)
    defined, self_attrs = _defined_names(tree)
    normalizer = _Normalizer(defined | {"self"}, self_attrs)
    tree = normalizer.visit(tree)
    return hashlib.sha256(ast.dump(tree, annotate_fields=False, include_attributes=False).encode()).hexdigest()


# ----------------------------------------------------------------------------- 2. signature and inputs
@dataclasses.dataclass(frozen=True)
class InputSpec:
    """What `get_inputs()` returns at one position: a tensor (rank, dtype; None when not readable) or a
    number (`tensor=False`)."""

    tensor: bool
    rank: int | None = None
    dtype: str | None = None

    def compatible(self, other: InputSpec) -> bool:
        if self.tensor != other.tensor:
            return False
        return all(a is None or b is None or a == b for a, b in ((self.rank, other.rank), (self.dtype, other.dtype)))


UNREADABLE = InputSpec(True)


class _InputReader:
    def __init__(self, tree: ast.Module):
        self.constants: dict[str, ast.expr] = {}
        for node in tree.body:
            if isinstance(node, ast.Assign):
                for target in node.targets:
                    if isinstance(target, ast.Name):
                        self.constants[target.id] = node.value
        self.function = next((n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "get_inputs"), None)
        self.locals: dict[str, ast.expr] = {}

    def specs(self) -> tuple[InputSpec, ...] | None:
        if self.function is None:
            return None
        returned = None
        for node in ast.walk(self.function):
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                self.locals[node.targets[0].id] = node.value
            elif isinstance(node, ast.Return) and returned is None:
                returned = node.value
        if not isinstance(returned, (ast.List, ast.Tuple)):
            return None
        return tuple(self.spec(element, 0) for element in returned.elts)

    def _length(self, node: ast.expr, depth: int) -> int | None:
        """The number of sizes a size argument stands for (a tuple, a starred constant tuple, one number)."""
        if isinstance(node, ast.Starred):
            target = node.value
            if isinstance(target, ast.Name) and depth < 5:
                target = self.locals.get(target.id, self.constants.get(target.id))
            return len(target.elts) if isinstance(target, (ast.Tuple, ast.List)) else None
        if isinstance(node, (ast.Tuple, ast.List)):
            total = 0
            for element in node.elts:
                count = self._length(element, depth + 1) if isinstance(element, ast.Starred) else 1
                if count is None:
                    return None
                total += count
            return total
        if isinstance(node, ast.Name) and isinstance(self.constants.get(node.id), (ast.Tuple, ast.List)):
            return len(self.constants[node.id].elts)
        return 1

    def spec(self, node: ast.expr, depth: int) -> InputSpec:
        if depth > 10:
            return UNREADABLE
        if isinstance(node, ast.Constant):
            return InputSpec(False)
        if isinstance(node, ast.Name):
            if node.id in self.locals:
                return self.spec(self.locals[node.id], depth + 1)
            return InputSpec(False) if node.id in self.constants else UNREADABLE
        if isinstance(node, ast.BinOp):
            left, right = self.spec(node.left, depth + 1), self.spec(node.right, depth + 1)
            tensors = [s for s in (left, right) if s.tensor]
            if not tensors:
                return InputSpec(False)
            ranks = [s.rank for s in tensors]
            rank = None if None in ranks else max(ranks)
            return InputSpec(True, rank, tensors[0].dtype)
        if isinstance(node, ast.UnaryOp):
            return self.spec(node.operand, depth + 1)
        if not isinstance(node, ast.Call):
            return UNREADABLE
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
        is_torch = isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "torch"
        dtype_kw = next((k.value for k in node.keywords if k.arg == "dtype"), None)
        dtype = dtype_kw.attr if isinstance(dtype_kw, ast.Attribute) else None
        if is_torch and name == "randint":
            size = next((k.value for k in node.keywords if k.arg == "size"), node.args[-1] if node.args else None)
            return InputSpec(True, self._length(size, depth) if size is not None else None, dtype or "int64")
        if is_torch and name in CREATION:
            if name.endswith("_like"):
                base = self.spec(node.args[0], depth + 1) if node.args else UNREADABLE
                return InputSpec(True, base.rank, dtype or base.dtype)
            args = node.args[:1] if name == "full" else node.args
            lengths = [self._length(a, depth) for a in args]
            rank = None if None in lengths else sum(lengths)
            return InputSpec(True, rank, dtype or "float32")
        if is_torch and node.args:  # torch.softmax(x, ...), torch.abs(x): like the first argument
            return self.spec(node.args[0], depth + 1)
        if isinstance(func, ast.Attribute):  # a method of a tensor expression
            base = self.spec(func.value, depth + 1)
            if name in CASTS:
                return InputSpec(True, base.rank, CASTS[name])
            if name == "to":
                target = node.args[0] if node.args else dtype_kw
                known = isinstance(target, ast.Attribute) and target.attr in FLOAT_DTYPES | {"int64", "long"}
                cast = target.attr if known else None
                return InputSpec(True, base.rank, cast or base.dtype)
            if name in KEEPS:
                return base
            return InputSpec(True, None, base.dtype)
        return UNREADABLE


def input_specs(source: str) -> tuple[InputSpec, ...] | None:
    """Rank and dtype of each value `get_inputs()` returns, read statically (None: no readable return list).

    Tensors from torch.randn/rand/zeros/ones/empty/full/randint (sizes counted from positional arguments,
    tuples and starred module-level tuples; dtype from `dtype=`, float32 by default, int64 for randint),
    through arithmetic (the larger rank), casts (`.half()`, `.to(torch.float16)`) and rank-keeping methods.
    """
    return _InputReader(ast.parse(source)).specs()


def _compatible(a: tuple[InputSpec, ...] | None, b: tuple[InputSpec, ...] | None) -> bool:
    if a is None or b is None:
        return True
    return len(a) == len(b) and all(x.compatible(y) for x, y in zip(a, b))


# ----------------------------------------------------------------------------- the decontaminator
@dataclasses.dataclass(frozen=True)
class DecontamMatch:
    problem: str  # the KernelBench problem's key, as given to the Decontaminator
    matcher: Literal["ast-hash", "signature"]
    ops: tuple[str, ...]


@dataclasses.dataclass(frozen=True)
class _Reference:
    key: str
    hash: str
    ops: tuple[str, ...] | None
    specs: tuple[InputSpec, ...] | None


@dataclasses.dataclass(frozen=True)
class DecontamReport:
    total: int
    kept: int
    ast_matches: int  # dropped: same normalized program
    signature_matches: int  # dropped: same signature on the same kinds of inputs (and not already an ast match)
    op_sequence_overlap: int  # same operator sequence as some problem, whatever the inputs (includes the above)
    by_problem: dict[str, int]  # KernelBench problem -> number of dropped tasks matching it
    references: int
    unreadable_references: int  # references whose forward could not be read (only the AST hash applies)

    def summary(self) -> str:
        return (f"{self.total} tasks: {self.kept} kept, {self.ast_matches} same program, {self.signature_matches} "
                f"same signature and inputs; {self.op_sequence_overlap} share an op sequence with one of "
                f"{self.references} references")


class Decontaminator:
    """Matches tasks against a list of reference sources (e.g. all of KernelBench).

    `references`: {key: source} or (key, source) pairs; keys name the problems in matches and reports.
    """

    def __init__(self, references: Mapping[str, str] | Iterable[tuple[str, str]]):
        items = list(references.items()) if isinstance(references, Mapping) else list(references)
        if not items:
            raise ValueError("no reference sources to decontaminate against")
        self.references: list[_Reference] = []
        self.unreadable = 0
        for key, source in items:
            try:
                digest = normalized_ast_hash(source)
            except SyntaxError as exc:
                raise ValueError(f"reference {key!r} does not parse: {exc}") from None
            try:
                ops, specs = op_signature(source), input_specs(source)
            except (ValueError, RecursionError):
                ops, specs = None, None
                self.unreadable += 1
            self.references.append(_Reference(key, digest, ops, specs))
        self._by_hash = {}
        for ref in self.references:
            self._by_hash.setdefault(ref.hash, ref)
        self._by_ops: dict[tuple[str, ...], list[_Reference]] = {}
        for ref in self.references:
            if ref.ops is not None:
                self._by_ops.setdefault(ref.ops, []).append(ref)

    def match(self, source: str) -> DecontamMatch | None:
        """The first reference this task counts as (see the module docstring), or None."""
        ops = op_signature(source)
        same = self._by_hash.get(normalized_ast_hash(source))
        if same is not None:
            return DecontamMatch(same.key, "ast-hash", ops)
        specs = input_specs(source)
        for ref in self._by_ops.get(ops, ()):
            if _compatible(specs, ref.specs):
                return DecontamMatch(ref.key, "signature", ops)
        return None

    def same_op_sequence(self, source: str) -> tuple[str, ...]:
        """Every reference with the task's operator sequence, whatever their inputs (the coarse overlap)."""
        return tuple(ref.key for ref in self._by_ops.get(op_signature(source), ()))

    def split(
        self, tasks: Iterable[GeneratedTask]
    ) -> tuple[list[GeneratedTask], list[tuple[GeneratedTask, DecontamMatch]]]:
        """(kept, dropped with their matches)."""
        kept, dropped = [], []
        for task in tasks:
            found = self.match(task.code)
            if found is None:
                kept.append(task)
            else:
                dropped.append((task, found))
        return kept, dropped

    def report(self, tasks: Iterable[GeneratedTask | str]) -> DecontamReport:
        total = ast_matches = signature_matches = overlap = 0
        by_problem: dict[str, int] = {}
        for task in tasks:
            source = task.code if isinstance(task, GeneratedTask) else task
            total += 1
            found = self.match(source)
            if found is not None:
                by_problem[found.problem] = by_problem.get(found.problem, 0) + 1
                ast_matches += found.matcher == "ast-hash"
                signature_matches += found.matcher == "signature"
            overlap += bool(self.same_op_sequence(source))
        return DecontamReport(total, total - ast_matches - signature_matches, ast_matches, signature_matches, overlap,
                              dict(sorted(by_problem.items())), len(self.references), self.unreadable)
