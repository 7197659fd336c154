"""What a call does: the candidate's own functions are followed; torch, builtins and tensor methods are
classified as glue or compute; calls that may launch a Triton kernel are counted.
"""

from __future__ import annotations

import ast

from sandbox_service.verifier.static import catalog
from sandbox_service.verifier.static.interpreter import FORMAT_METHODS, AnalysisBudgetExceeded, Frame, Interpreter
from sandbox_service.verifier.static.values import (
    EMPTY, IDENT, NONE, SCALAR, TENSOR, AutogradApply, Bound, ClassInfo, Container, ContainerMethod, Ctx, Env, Func,
    Instance, Kernel, Kind, Launcher, Member, Ref, Super, TensorMethod, Value, contains_ident, element_of, is_input,
    is_unknown, known_non_tensor, make_container, may_tensor, signature, tensor_kinds, union,
)

# Where a called function runs, given where its caller runs: module-level calls happen at import,
# like construction.
_CALLEE_CTX = {Ctx.FORWARD: Ctx.FORWARD, Ctx.INIT: Ctx.INIT, Ctx.MODULE: Ctx.INIT, Ctx.OTHER: Ctx.OTHER}
_HOOK_METHODS = frozenset({"register_forward_hook", "register_forward_pre_hook"})
_STREAM_METHODS = frozenset({"wait_stream", "record_stream"})
_SCALAR_BUILTINS = frozenset(
    "len int float bool str repr isinstance issubclass callable format ord chr hex bin oct hasattr id hash print".split()
)
# Higher-order functions whose callbacks call_ref already runs with the right arguments.
_HANDLED_HIGHER_ORDER = frozenset({"functools.partial", "functools.reduce", "torch.library.wrap_triton"})
_CONTENT_COMPARISONS = frozenset("equal allclose isclose".split())
_IDENTITY_PRESERVING = frozenset("str int repr format hex bin oct".split())
_SEQUENCE_BUILTINS = frozenset("list tuple set frozenset sorted reversed iter filter".split())
_WRAPPER_COPIERS = frozenset({"functools.wraps", "functools.update_wrapper"})
_REFLECTIVE = frozenset({"builtins.getattr", "builtins.setattr", "builtins.delattr", "builtins.hasattr"})
# Methods that read or write an attribute named by their first argument.
_ACCESSOR_METHODS = frozenset("__getattribute__ __getattr__ __setattr__ __delattr__".split())
_DICT_LOOKUPS = frozenset("get pop setdefault __getitem__".split())


class CallRules(Interpreter):
    # Set when the reference itself computes in 16-bit floats: casting to them is then no downgrade.
    allow_low_precision_casts = False

    # --- the call expression ------------------------------------------------------------------------------
    def eval_call(self, node: ast.Call, frame: Frame) -> Value:
        func_node = node.func
        if isinstance(func_node, ast.Attribute):
            base = self.eval(func_node.value, frame)
            self.check_attr_name(func_node.attr, base, func_node, frame)
            callee = union(self.attribute_of(a, func_node.attr, func_node, frame) for a in base) if base else frozenset({Member(func_node.attr)})
        else:
            base = None
            callee = self.eval(func_node, frame)
        args: list[Value] = []
        kwargs: dict[str, Value] = {}
        for arg in node.args:
            value = self.eval(arg, frame)
            if isinstance(arg, ast.Starred):
                value = element_of(value)
                kwargs["*"] = kwargs.get("*", EMPTY) | value
            args.append(value)
        for keyword in node.keywords:
            value = self.eval(keyword.value, frame)
            if keyword.arg is None:
                kwargs["**"] = kwargs.get("**", EMPTY) | element_of(value)
            else:
                kwargs[keyword.arg] = value
        if any(isinstance(a, Ref) and a.path in _REFLECTIVE for v in [*args, *kwargs.values()] for a in v):
            self.flag("dynamic-getattr", node, "hands getattr (or setattr, delattr, hasattr) to another call: the names it reads are not in the source")
        if isinstance(func_node, ast.Attribute):
            # Name rules for receivers call_atom does not see as methods (modules, classes, own objects).
            self.method_effects(func_node.attr, base, node, args, kwargs, frame)
            self.check_hidden_access(func_node, base, node)
        generator = func_node.attr if isinstance(func_node, ast.Attribute) else getattr(func_node, "id", None)
        if generator in catalog.INPUT_GENERATORS and frame.ctx in (Ctx.MODULE, Ctx.INIT, Ctx.FORWARD):
            self.flag("precomputed-output", node, f"calls {generator}(): the candidate generates the evaluation's inputs itself")
        opaque = all(isinstance(a, (Member, Ref)) for a in callee)  # nothing of the candidate's to follow
        if opaque and not any(isinstance(a, Ref) and (a.path.startswith("builtins.") or a.path in _HANDLED_HIGHER_ORDER) for a in callee):
            self.run_callbacks(node, args, kwargs, frame)
        if frame.ctx is Ctx.FORWARD and opaque:
            # Calls the analysis cannot follow may launch a kernel: `table[key][grid](...)`, or a kernel handed
            # to an imported or unknown launcher. Only the runtime layer can count those.
            passes_kernel = any(isinstance(a, (Kernel, Launcher)) for v in [*args, *kwargs.values()] for a in v)
            if passes_kernel or (isinstance(func_node, ast.Subscript) and is_unknown(callee)):
                self.possible_launches += 1
        return union(self.call_atom(atom, node, args, kwargs, frame) for atom in callee)

    def run_callbacks(self, node: ast.Call, args: list[Value], kwargs: dict[str, Value], frame: Frame) -> None:
        """A function of the candidate's handed to a call the analysis does not follow (a thread, checkpoint,
        vmap, a library) runs there with the call's data: analyse it with the other arguments."""
        values = [*args, *kwargs.values()]
        data = [v for v in values if not any(isinstance(a, (Func, Bound)) for a in v)]
        for value in values:
            for atom in value:
                if isinstance(atom, (Func, Bound)):
                    self.call_atom(atom, node, data, {}, frame)

    def call_atom(self, atom, node: ast.Call, args: list[Value], kwargs: dict[str, Value], frame: Frame) -> Value:
        if isinstance(atom, Ref):
            return self.call_ref(atom.path, node, args, kwargs, frame)
        if isinstance(atom, Func):
            return self.call_func(atom, None, args, kwargs, node, frame)
        if isinstance(atom, Bound):
            return self.call_func(atom.func, atom.receiver, args, kwargs, node, frame)
        if isinstance(atom, Launcher):
            if frame.ctx is Ctx.FORWARD:
                self.launches += 1
            return NONE
        if isinstance(atom, ClassInfo):
            return self.instantiate(atom, node, args, kwargs, frame)
        if isinstance(atom, Instance):
            return self.call_instance(atom, node, args, kwargs, frame)
        if isinstance(atom, Container):
            if atom.callable_chain:
                return union(self.call_atom(e, node, args, kwargs, frame) for e in list(atom.elements))
            return EMPTY
        if isinstance(atom, ContainerMethod):
            return self.container_method(atom, node, args, frame)
        if isinstance(atom, AutogradApply):
            found = atom.cls.lookup("forward")
            funcs = [a for a in found[1] if isinstance(a, Func)] if found else []
            return union(self.call_func(f, None, [EMPTY, *args], kwargs, node, frame) for f in funcs)
        if isinstance(atom, TensorMethod):
            self.method_effects(atom.name, atom.receiver, node, args, kwargs, frame)
            return self.tensor_method(atom.name, atom.receiver, node, frame)
        if isinstance(atom, Member):
            self.method_effects(atom.name, EMPTY, node, args, kwargs, frame)
            return self.unknown_method(atom.name, node, args, frame)
        if atom in (Kind.SCALAR, Kind.IDENT):
            return SCALAR
        return EMPTY

    def method_effects(self, name: str, base: Value, node: ast.Call, args: list[Value], kwargs: dict[str, Value], frame: Frame) -> None:
        """Rules that depend only on a method's name (the receiver may be of any type but a plain value)."""
        if base and all(_plain(atom) for atom in base):
            return
        if frame.ctx is not Ctx.KERNEL and not self.allow_low_precision_casts and (
            name in catalog.LOW_PRECISION_METHODS or (name in ("to", "type") and self.low_precision(node, args, kwargs))
        ):
            self.flag("precision-downgrade", node, f"casts to a lower precision with .{name}(...)")
        if name in _STREAM_METHODS:
            self.flag("side-stream", node, f"calls .{name}(): work crosses CUDA streams")
        if name in _HOOK_METHODS:
            self.flag("forward-rebinding", node, f"calls .{name}(): a hook can replace the module's inputs or outputs")

    def check_hidden_access(self, func_node: ast.Attribute, base: Value, node: ast.Call) -> None:
        """Attribute reads that no attribute in the source shows: `x.__getattribute__(name)` and
        `x.__dict__.get(name)` with a computed name, and str.format templates (check_format)."""
        name, first = func_node.attr, node.args[0] if node.args else None
        if name in _ACCESSOR_METHODS and not (first is not None and _literal_str(first)):
            self.flag("dynamic-getattr", node, f".{name}() with a computed attribute name")
        elif name in _DICT_LOOKUPS and first is not None:
            self.check_namespace_lookup(func_node.value, first, node)
        elif name in FORMAT_METHODS:
            self.check_format(name, func_node.value, base, node, str_template=first)

    @staticmethod
    def low_precision(node: ast.Call, args: list[Value], kwargs: dict[str, Value]) -> bool:
        values = [*args, *kwargs.values()]
        if any(isinstance(a, Ref) and a.path in catalog.LOW_PRECISION_DTYPES for v in values for a in v):
            return True
        constants = [*node.args, *(k.value for k in node.keywords)]
        return any(isinstance(c, ast.Constant) and c.value in catalog.LOW_PRECISION_STRINGS for c in constants)

    # --- the candidate's own functions and classes -------------------------------------------------------------
    def call_func(self, func: Func, receiver: Value | None, args: list[Value], kwargs: dict[str, Value], node: ast.AST,
                  frame: Frame) -> Value:
        if frame.ctx is Ctx.KERNEL:
            self.flag("python-in-kernel", node, f"a @triton.jit body calls the Python function {func.name}")
            return EMPTY
        ctx = _CALLEE_CTX[frame.ctx]
        if func.cached and ctx is Ctx.FORWARD and any(may_tensor(v) for v in [*args, *kwargs.values()]):
            self.flag("identity-cache", node, f"calls {func.name}, wrapped in an lru_cache, with tensors: results are cached by tensor identity")
        params = self.bind_params(func, receiver, args, kwargs)
        key = (func, ctx, tuple(sorted((name, signature(value)) for name, value in params.items())))
        if key in self.memo:
            return self.memo[key]
        if key in self.active:
            return EMPTY
        self.analyses += 1
        if self.analyses > self.MAX_ANALYSES:
            raise AnalysisBudgetExceeded(f"more than {self.MAX_ANALYSES} function analyses")
        self.active.add(key)
        try:
            env = Env(func.closure)
            env.vars.update(params)
            inner = Frame(ctx, env, cls=func.owner, receiver=receiver)
            self.analysed.add(id(func.node))
            if isinstance(func.node, ast.Lambda):
                result = self.eval(func.node.body, inner)
            else:
                self.exec_block(func.node.body, inner)
                result = frozenset(inner.returns) or NONE
        finally:
            self.active.discard(key)
        self.memo[key] = result
        return result

    def bind_params(self, func: Func, receiver: Value | None, args: list[Value], kwargs: dict[str, Value]) -> dict[str, Value]:
        spec = func.node.args
        positional = [p.arg for p in spec.posonlyargs + spec.args]
        values = list(args) if receiver is None else [receiver, *args]
        spread = kwargs.get("*", EMPTY) | kwargs.get("**", EMPTY)
        params: dict[str, Value] = {}
        for i, name in enumerate(positional):
            if i < len(values):
                params[name] = values[i]
            elif name in kwargs:
                params[name] = kwargs[name]
            else:
                params[name] = spread | func.defaults.get(name, EMPTY)
        if spec.vararg is not None:
            params[spec.vararg.arg] = make_container("tuple", values[len(positional):])
        for param in spec.kwonlyargs:
            params[param.arg] = kwargs.get(param.arg, spread | func.defaults.get(param.arg, EMPTY))
        if spec.kwarg is not None:
            known = set(positional) | {p.arg for p in spec.kwonlyargs} | {"*", "**"}
            extra = Container("dict", set())
            extra.add(union(v for k, v in kwargs.items() if k not in known))
            params[spec.kwarg.arg] = frozenset({extra})
        return params

    def instantiate(self, cls: ClassInfo, node: ast.Call, args: list[Value], kwargs: dict[str, Value], frame: Frame) -> Value:
        instance = frozenset({Instance(cls)})
        found = cls.lookup("__init__")
        for atom in found[1] if found else ():
            for bound in self.bind_member(atom, instance):
                self.call_atom(bound, node, args, kwargs, frame)
        return instance

    def call_instance(self, atom: Instance, node: ast.Call, args: list[Value], kwargs: dict[str, Value], frame: Frame) -> Value:
        cls = atom.cls
        if isinstance(cls, Ref):
            return self.call_layer(catalog.normalise_nn_path(cls.path), node, args, frame)
        for name in ("__call__", "forward"):
            found = cls.lookup(name)
            if found is not None:
                receiver = frozenset({atom})
                return union(self.call_atom(b, node, args, kwargs, frame) for a in found[1] for b in self.bind_member(a, receiver))
        for base in cls.foreign_bases():
            return self.call_layer(catalog.normalise_nn_path(base), node, args, frame)
        return EMPTY

    def call_layer(self, path: str, node: ast.Call, args: list[Value], frame: Frame) -> Value:
        """Calling an instance of an imported class: a torch.nn compute layer computes."""
        if not path.startswith("torch.nn."):
            return EMPTY
        name = path.split(".")[2]
        if name in catalog.NN_NONCOMPUTE:
            return args[0] if name == "Identity" and args else EMPTY
        if frame.ctx is Ctx.FORWARD:
            self.flag("nn-layer-call", node, f"calls a torch.nn.{name} layer")
        return TENSOR

    def container_method(self, atom: ContainerMethod, node: ast.Call, args: list[Value], frame: Frame) -> Value:
        container, name = atom.container, atom.name
        key = args[0] if args else EMPTY
        forward = frame.ctx is Ctx.FORWARD
        if forward and name in ("get", "pop", "setdefault", "__getitem__", "__contains__", "__setitem__", "add") and (
            contains_ident(key) or (may_tensor(key) and container.kind in ("dict", "set"))
        ):
            self.flag("identity-cache", node, f"uses an identity key or a tensor as a key in .{name}()")
        if name in ("append", "add", "insert", "setdefault", "__setitem__"):
            container.add(args[-1] if args else EMPTY)
        elif name in ("extend", "update"):
            container.add(element_of(key))
        if name in ("get", "pop", "setdefault", "__getitem__"):
            return frozenset(container.elements) | (NONE if name == "get" else EMPTY)
        if name in ("values", "items", "keys", "copy"):
            return frozenset({container})
        if name in ("index", "count", "__len__", "__contains__"):
            return SCALAR
        return EMPTY

    # --- imported functions ---------------------------------------------------------------------------------
    def call_ref(self, path: str, node: ast.Call, args: list[Value], kwargs: dict[str, Value], frame: Frame) -> Value:
        path = catalog.normalise_nn_path(path)
        while path.endswith(".__call__") and not path.rsplit(".", 2)[-2][:1].isupper():
            path = path[: -len(".__call__")]  # torch.matmul.__call__(a, b) is torch.matmul(a, b); nn.Module.__call__ stays
        last = path.rsplit(".", 1)[-1]
        forward = frame.ctx is Ctx.FORWARD
        if path.startswith("builtins."):
            return self.call_builtin(last, node, args, kwargs, frame)
        if path in _WRAPPER_COPIERS:
            self.check_copied_names(path, node, frame)
        if path == "functools.partial":
            return args[0] if args else EMPTY
        if path in catalog.CACHE_DECORATORS:
            return frozenset({Ref(path)})
        if path == "functools.reduce" and len(args) >= 2:
            items = element_of(args[1])
            return union(self.call_atom(a, node, [items, items], {}, frame) for a in args[0])
        if path == "contextlib.suppress":
            if forward:
                self.flag("exception-fallback", node, "contextlib.suppress on the forward path: a failing kernel is silently skipped")
            return EMPTY
        if path.startswith("operator.") and last in catalog.OPERATOR_FUNCTIONS:
            return self.apply_operator(f"operator.{last}", args, node, frame, always=last in ("matmul", "imatmul"))
        if path in catalog.TRITON_SCALAR_FUNCTIONS:
            return SCALAR
        if path in catalog.TORCH_TRITON_LAUNCHERS:
            return args[0] if args else EMPTY
        if path in catalog.TRITON_KERNEL_DECORATORS:
            wrapped = args[0] if args else EMPTY
            kernels = [a for a in wrapped if isinstance(a, Kernel)] + [Kernel(a.name) for a in wrapped if isinstance(a, Func)]
            return frozenset(kernels) if kernels else frozenset({Ref(path)})
        if path == "torch" or path.startswith("torch."):
            return self.call_torch(path, last, node, args, kwargs, frame)
        if path.startswith(("numpy.", "einops.")):
            if path.startswith("einops.") and last in ("rearrange", "repeat", "pack", "unpack"):
                return tensor_kinds(args[0]) if args else TENSOR
            if forward and any(may_tensor(a) for a in [*args, *kwargs.values()]):
                self.flag("foreign-compute-call", node, f"{path} computes on tensors outside Triton")
            return EMPTY
        if path.startswith("math."):
            return SCALAR
        return EMPTY

    def call_torch(self, path: str, last: str, node: ast.Call, args: list[Value], kwargs: dict[str, Value], frame: Frame) -> Value:
        forward = frame.ctx is Ctx.FORWARD
        parts = path.split(".")
        if forward and "out" in kwargs and is_input(kwargs["out"]):
            self.flag("input-mutation", node, f"{path}(..., out=) writes into an input tensor")
        if last in _CONTENT_COMPARISONS:
            self.check_content_cache(node, frame)
        if path.startswith("torch.Tensor.") and len(parts) == 3:
            return self.tensor_method(last, args[0] if args else EMPTY, node, frame)
        if path.startswith("torch.nn.functional."):
            if last not in catalog.FUNCTIONAL_GLUE and forward:
                self.flag("torch-functional-call", node, f"calls {path}")
            if forward and args and is_input(args[0]) and any(
                k.arg == "inplace" and isinstance(k.value, ast.Constant) and k.value.value is True for k in node.keywords
            ):
                self.flag("input-mutation", node, f"{path}(..., inplace=True) writes into an input tensor")
            return TENSOR
        if path.startswith("torch.ops."):
            if forward:
                self.flag("torch-ops-call", node, f"calls {path}")
            return TENSOR
        if path.startswith("torch.nn."):
            return self.construct_nn(path, parts[2:], node, args, frame)
        if any(path == ns or path.startswith(ns + ".") for ns in catalog.TORCH_COMPUTE_NAMESPACES):
            if forward:
                self.flag("torch-compute-call", node, f"calls {path}")
            return TENSOR
        if len(parts) != 2:
            return EMPTY  # torch.cuda.*, torch.backends.*, torch.utils.*, ...: dangerous ones are denied by name
        if last[:1].isupper():
            return TENSOR if last.endswith("Tensor") else SCALAR
        if last in catalog.TORCH_ALLOC or last in catalog.TORCH_COPIES:
            return TENSOR
        if last in catalog.TORCH_VIEWS:
            return tensor_kinds(args[0]) if args else TENSOR
        if last in catalog.TORCH_META or last.startswith(("is_", "get_", "set_")):
            return SCALAR
        if catalog.deny_match(path) or catalog.rng_match(path):
            return EMPTY  # reported where it was referenced
        if forward:
            self.flag("torch-compute-call", node, f"calls {path}")
        return TENSOR

    def construct_nn(self, path: str, rest: list[str], node: ast.Call, args: list[Value], frame: Frame) -> Value:
        name = rest[0] if rest else ""
        if not name[:1].isupper():
            return EMPTY  # torch.nn.init.*, torch.nn.utils.*
        if len(rest) > 1:
            # A method called through the class, e.g. nn.Linear.forward(self.fc, x) or nn.Module.__init__(self).
            if rest[1] in ("forward", "__call__"):
                own = [a for a in (args[0] if args else EMPTY) if isinstance(a, Instance)]
                if own:  # the module is passed explicitly: nn.Module.__call__(self.ref, x)
                    return union(self.call_instance(a, node, args[1:], {}, frame) for a in own)
                return self.call_layer(f"torch.nn.{name}", node, args[1:], frame)
            return EMPTY
        if name in ("Parameter", "Buffer", "UninitializedParameter", "UninitializedBuffer"):
            return TENSOR
        if name in catalog.NN_CONTAINERS:
            container = Container("dict" if name.endswith("Dict") else "list", set(), callable_chain=name == "Sequential")
            for arg in args:
                container.add(element_of(arg) | frozenset(a for a in arg if not isinstance(a, Container)))
            return frozenset({container})
        if name not in catalog.NN_NONCOMPUTE and frame.ctx is Ctx.FORWARD:
            self.flag("nn-layer-call", node, f"builds a torch.nn.{name} layer in forward")
        return frozenset({Instance(Ref(path))})

    def tensor_method(self, name: str, receiver: Value, node: ast.Call, frame: Frame) -> Value:
        base = _dunder_base(name)
        forward = frame.ctx is Ctx.FORWARD
        if base in _CONTENT_COMPARISONS:
            self.check_content_cache(node, frame)
        if base == "data_ptr":
            return IDENT
        if forward and base.endswith("_") and base not in catalog.TENSOR_INPLACE_HARMLESS and is_input(receiver):
            self.flag("input-mutation", node, f"calls .{name}() on an input tensor")
        if base in catalog.TENSOR_SCALAR_METHODS:
            return SCALAR
        if base in catalog.TENSOR_VIEW_METHODS:
            return tensor_kinds(receiver)
        if base in catalog.TENSOR_GLUE_METHODS:
            return TENSOR
        if forward:
            self.flag("tensor-method-call", node, f"calls .{name}() on a tensor")
        return TENSOR

    def check_content_cache(self, node: ast.Call, frame: Frame) -> None:
        """torch.equal(x, self.last_x) and the like: a cache keyed by the input's contents."""
        operands = list(node.args) + ([node.func.value] if isinstance(node.func, ast.Attribute) else [])
        if frame.ctx is Ctx.FORWARD and any(self.is_persistent(n, frame) for n in operands):
            self.flag("identity-cache", node, "compares an input with stored state: results cached by contents")

    def unknown_method(self, name: str, node: ast.Call, args: list[Value], frame: Frame) -> Value:
        base = _dunder_base(name)
        if base == "data_ptr":
            return IDENT
        if frame.ctx is Ctx.FORWARD:
            inner = name[2:-2] if name.startswith("__") and name.endswith("__") else ""
            explicit_operator = inner in catalog.DUNDER_OPERATORS and inner not in ("getitem", "setitem", "len", "contains")
            if base in catalog.TENSOR_SPECIFIC_COMPUTE or explicit_operator:
                self.flag("tensor-method-call", node, f"calls .{name}(), a tensor compute method")
                return TENSOR
            if base in ("get", "setdefault", "pop", "contains") and args and contains_ident(args[0]):
                self.flag("identity-cache", node, f"looks up an identity key with .{name}()")
        return EMPTY

    def apply_operator(self, what: str, operands: list[Value], node: ast.AST, frame: Frame, always: bool = False) -> Value:
        tensor = always and not all(known_non_tensor(v) for v in operands) or any(may_tensor(v) for v in operands)
        if tensor:
            if frame.ctx is Ctx.FORWARD:
                self.flag("tensor-operator", node, f"applies {what} to tensors")
            return TENSOR
        return SCALAR if operands and all(known_non_tensor(v) for v in operands) else EMPTY

    # --- builtins ---------------------------------------------------------------------------------------------
    def call_builtin(self, name: str, node: ast.Call, args: list[Value], kwargs: dict[str, Value], frame: Frame) -> Value:
        first = args[0] if args else EMPTY
        if name in ("getattr", "setattr", "delattr", "hasattr"):
            return self.reflective_call(name, node, args, frame)
        if name in ("staticmethod", "classmethod", "property"):
            return first  # `forward = staticmethod(torch.relu)` is still torch.relu
        if name == "super":
            return frozenset({Super(frame.cls, frame.receiver or EMPTY)}) if frame.cls is not None else EMPTY
        if name == "id":
            if frame.ctx is Ctx.FORWARD and not (first and all(isinstance(a, Instance) and a.is_self for a in first)):
                self.flag("identity-cache", node, "uses id(): results keyed by object identity")
            return IDENT
        if name == "hash":
            return IDENT if may_tensor(first) or contains_ident(first) else SCALAR
        if name in catalog.OPERATOR_BUILTINS:
            operands = list(args)
            if len(args) == 1 and name in ("sum", "max", "min"):
                operands = [element_of(first)]
            return self.apply_operator(f"{name}()", operands, node, frame)
        if name == "type":
            if len(args) == 3:
                self.flag("dynamic-code", node, "type(name, bases, namespace) builds a class at run time")
                return EMPTY
            return union(_type_of(a) for a in first)
        if name in _IDENTITY_PRESERVING and contains_ident(first):
            return IDENT  # str(x.data_ptr()) is still an identity key
        if name in _SCALAR_BUILTINS:
            return SCALAR
        if name == "range":
            return make_container("list", [SCALAR])
        if name in _SEQUENCE_BUILTINS:
            return make_container("list", [element_of(args[-1] if args else EMPTY)])
        if name == "enumerate":
            return make_container("list", [make_container("tuple", [SCALAR, element_of(first)])])
        if name == "zip":
            return make_container("list", [make_container("tuple", [element_of(a) for a in args])])
        if name == "map" and len(args) >= 2:
            results = union(self.call_atom(a, node, [element_of(x) for x in args[1:]], {}, frame) for a in first)
            return make_container("list", [results])
        if name == "next":
            return element_of(first)
        if name == "dict":
            container = Container("dict", set())
            container.add(union([element_of(first), *kwargs.values()]))
            return frozenset({container})
        return EMPTY

    def check_copied_names(self, path: str, node: ast.Call, frame: Frame) -> None:
        """functools.wraps/update_wrapper copy the attributes named in `assigned` and `updated` (`__dict__` by
        default): names given there are attribute reads like getattr's, and must be literal and allowed."""
        first = 1 if path == "functools.wraps" else 2  # wraps(wrapped, assigned, updated)
        given = [*node.args[first:first + 2], *(k.value for k in node.keywords if k.arg in ("assigned", "updated"))]
        for names in given:
            items = names.elts if isinstance(names, (ast.Tuple, ast.List)) else [names]
            for item in items:
                if _literal_str(item):
                    self.check_attr_name(item.value, EMPTY, item, frame)
                else:
                    self.flag("dynamic-getattr", item, f"{path} copies attributes whose names are computed")

    def reflective_call(self, name: str, node: ast.Call, args: list[Value], frame: Frame) -> Value:
        """getattr & co. with a literal name are attribute accesses, checked as such; with a computed name they
        hide what is reached, on any object (`getattr(frame, "f_" + "back")`)."""
        if len(node.args) < 2:
            return EMPTY
        target = args[0]
        name_node = node.args[1]
        if not _literal_str(name_node):
            self.flag("dynamic-getattr", node, f"{name}() with a computed attribute name")
            return SCALAR if name == "hasattr" else EMPTY
        attr = name_node.value
        self.check_attr_name(attr, target, node, frame)
        if attr in FORMAT_METHODS:
            self.check_format(attr, node.args[0], target, node)
        if name == "setattr":
            self.store_attr_value(target, attr, args[2] if len(args) > 2 else EMPTY, node, frame)
            return NONE
        if name == "delattr":
            for atom in target:
                if isinstance(atom, Ref):
                    self.flag("monkeypatch", node, f"deletes {atom.path}.{attr}")
            return NONE
        if name == "hasattr":
            return SCALAR
        if not target:
            return frozenset({Member(attr)})
        return union(self.attribute_of(a, attr, node, frame) for a in target)


def _literal_str(node: ast.expr) -> bool:
    return isinstance(node, ast.Constant) and isinstance(node.value, str)


def _plain(atom) -> bool:
    """A receiver that is certainly not a tensor or a torch object."""
    if isinstance(atom, Ref):
        return not (atom.path == "torch" or atom.path.startswith("torch."))
    return atom in (Kind.SCALAR, Kind.NONE, Kind.IDENT) or isinstance(atom, (Container, Kernel, Func, Launcher))


def _dunder_base(name: str) -> str:
    if name.startswith("__") and name.endswith("__") and len(name) > 4:
        inner = name[2:-2]
        return catalog.DUNDER_OPERATORS.get(inner, inner)
    return name


def _type_of(atom) -> Value:
    if atom in (Kind.TENSOR, Kind.INPUT):
        return frozenset({Ref("torch.Tensor")})
    if isinstance(atom, Instance):
        return frozenset({atom.cls})
    if atom in (Kind.SCALAR, Kind.IDENT):
        return SCALAR
    return EMPTY

