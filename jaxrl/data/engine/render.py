"""A Program written as a KernelBench reference module, in one of many equivalent spellings.

The layout is KernelBench's: imports, `class Model(nn.Module)` with a docstring, `__init__` taking what
`get_init_inputs()` returns, `forward`, module-level size constants, `get_inputs()` (tensors without a
device) and `get_init_inputs()`. What varies with the random draw is the written form: `torch.relu(x)`,
`F.relu(x)`, `x.relu()` or an `nn.ReLU()` module; nested or one statement per step; docstrings; type
hints; `super()` style. Every named spelling of an operator maps to the same canonical name in
`op_signature`, so the signature of a task does not depend on how it was written; an expression spelling
(`x * torch.sigmoid(x)` for SiLU, `pointwise.EXPRESSIONS`) writes the operator's math out instead, and
its signature is that of the arithmetic. `spelling` chooses: `any` (training: a quarter of the operators
that have an expression get it), `expression` (always, where one exists) or `name` (never).
"""

from __future__ import annotations

import ast
import dataclasses
import random

from jaxrl.data.engine.inputs import get_inputs_source, init_inputs_source, torch_dtype
from jaxrl.data.engine.ir import (
    Arith,
    Cat,
    CosineSimilarity,
    Gather,
    IndexSelect,
    Linear,
    Loss,
    MatMul,
    Norm,
    Operand,
    Permute,
    Pointwise,
    Program,
    Reduce,
    Scalar,
    Scan,
    Softmax,
    Stage,
)
from jaxrl.data.engine.pointwise import ARITH_FUNCTIONS, ARITH_SYMBOLS, pointwise

INDENT = "    "


@dataclasses.dataclass(frozen=True)
class InitLine:
    """One statement of `Model.__init__`. ModelNew repeats those that create weights or store numbers
    (`solution_keeps`), in the same order; parameterless modules (nn.ReLU()) it does not need."""

    text: str
    solution_keeps: bool


@dataclasses.dataclass(frozen=True)
class Reference:
    code: str
    init_args: tuple[str, ...]
    init_lines: tuple[InitLine, ...]
    spell: dict[str, str]  # dim key or "init:<arg>" -> the constant naming it
    expressed: tuple[str, ...] = ()  # operators written as explicit math rather than by name


def atom(expr: str) -> str:
    """`expr` parenthesised when it is an operator expression (so `.relu()` or `* 2` bind to all of it)."""
    node = ast.parse(expr, mode="eval").body
    return f"({expr})" if isinstance(node, (ast.BinOp, ast.UnaryOp, ast.Compare, ast.BoolOp, ast.IfExp)) else expr


SPELLINGS = ("any", "name", "expression")
EXPRESSION_SHARE = 0.25


class _Writer:
    def __init__(self, program: Program, rng: random.Random, spelling: str = "any"):
        if spelling not in SPELLINGS:
            raise ValueError(f"spelling must be one of {SPELLINGS}, got {spelling!r}")
        self.p = program
        self.rng = rng
        self.spelling = spelling
        self.expressed: list[str] = []  # operators written as their math
        self.init_lines: list[InitLine] = []
        self.attrs: set[str] = {param.attr for param in program.params}
        self.declared_params: set[str] = set()
        self.uses_f = False

    # -- helpers ---------------------------------------------------------------------------------
    def choice(self, options):
        return options[self.rng.randrange(len(options))]

    def attr_name(self, candidates: tuple[str, ...]) -> str:
        for name in self.rng.sample(candidates, len(candidates)):
            if name not in self.attrs:
                self.attrs.add(name)
                return name
        base, n = candidates[0], 2
        while f"{base}{n}" in self.attrs:
            n += 1
        self.attrs.add(f"{base}{n}")
        return f"{base}{n}"

    def scalar(self, value: Scalar, in_init: bool = False) -> str:
        if value.init is None:
            return repr(value.value)
        return value.init if in_init else f"self.{value.init}"

    def dtype_kw(self) -> str:
        return "" if self.p.dtype == "float32" else f", dtype={torch_dtype(self.p.dtype)}"

    def declare_param(self, attr: str) -> None:
        if attr in self.declared_params:
            return
        param = next(p for p in self.p.params if p.attr == attr)
        if param.shape_arg:
            shape = param.shape_arg
        else:  # through the __init__ arguments: ModelNew lives in another module, without our constants
            by_dim = {a.dim: a.name for a in self.p.init_args if a.dim}
            shape = ", ".join("1" if isinstance(d, int) else by_dim[d] for d in param.dims)
        expr = f"torch.randn({shape}{self.dtype_kw()})"
        if param.std != 1.0:
            expr += f" * {param.std!r}"
        if param.mean:
            expr += f" + {param.mean!r}"
        self.init_lines.append(InitLine(f"self.{attr} = nn.Parameter({expr})", True))
        self.declared_params.add(attr)

    def module(self, ctor: str, names: tuple[str, ...]) -> str:
        """A parameterless module (activation, softmax, loss) built in __init__ and called in forward."""
        attr = self.attr_name(names)
        self.init_lines.append(InitLine(f"self.{attr} = {ctor}", False))
        return f"self.{attr}"

    def fn(self, template: str, x: str, **values: str) -> str:
        """`template` filled in; `x` is parenthesised where a method or an operator binds to it."""
        if "F." in template.replace("functional.", ""):
            self.uses_f = True
        bound = "{x}." in template or "{x} " in template or " {x}" in template
        return template.format(x=atom(x) if bound else x, **values)

    # -- stages ----------------------------------------------------------------------------------
    def stage(self, stage: Stage, x: str) -> str:
        method = getattr(self, f"_{type(stage).__name__.lower()}")
        return method(stage, x)

    def _pointwise(self, stage: Pointwise, x: str) -> str:
        op = pointwise(stage.op)
        params = dict(stage.params)
        if op.expressions and (self.spelling == "expression"
                               or self.spelling == "any" and self.rng.random() < EXPRESSION_SHARE):
            self.expressed.append(stage.op)
            template = self.choice(op.expressions)
            if "F." in template:
                self.uses_f = True
            return template.format(x=atom(x), **{k: self.scalar(v) for k, v in params.items()})
        use_module = op.modules and self.rng.random() < 0.3
        if use_module:
            ctor = self.choice(op.modules).format(**{k: self.scalar(v, in_init=True) for k, v in params.items()})
            holder = self.module(ctor, (stage.op.replace("_", ""), "act", "activation", f"{stage.op}_fn"))
            return f"{holder}({x})"
        template = self.choice(op.functions)
        return self.fn(template, x, **{k: self.scalar(v) for k, v in params.items()})

    def _operand(self, other: Scalar | Operand) -> str:
        if isinstance(other, Scalar):
            return self.scalar(other)
        if other.source == "param":
            self.declare_param(other.name)
            return f"self.{other.name}"
        return other.name

    def _arith(self, stage: Arith, x: str) -> str:
        y = self._operand(stage.other)
        if stage.reverse or self.rng.random() < 0.75:
            left, right = (y, x) if stage.reverse else (x, y)
            return f"{atom(left)} {ARITH_SYMBOLS[stage.op]} {atom(right)}"
        return self.fn(self.choice(ARITH_FUNCTIONS[stage.op]), x, y=y)

    def _linear(self, stage: Linear, x: str) -> str:
        bias = "" if stage.bias else ", bias=False"
        ctor = f"nn.Linear({stage.in_arg}, {stage.out_arg}{bias}{self.dtype_kw()})"
        self.attrs.add(stage.attr)
        self.init_lines.append(InitLine(f"self.{stage.attr} = {ctor}", True))
        if stage.bias and self.rng.random() < 0.2:
            self.uses_f = True
            return f"F.linear({x}, self.{stage.attr}.weight, self.{stage.attr}.bias)"
        return f"self.{stage.attr}({x})"

    def _matmul(self, stage: MatMul, x: str) -> str:
        rank = self.p.input(stage.other).rank
        a, b = x, stage.other

        def transposed(v: str) -> str:
            forms = ["{v}.transpose(-2, -1)", "{v}.mT"] + (["{v}.T", "{v}.t()"] if rank == 2 else [])
            return self.choice(forms).format(v=v)

        if stage.transpose_self:
            a = transposed(atom(a))
        if stage.transpose_other:
            b = transposed(b)
        forms = ["torch.matmul({x}, {b})", "{x} @ {b}", "{x}.matmul({b})"]
        forms.append("torch.mm({x}, {b})" if rank == 2 else "torch.bmm({x}, {b})")
        return self.fn(self.choice(forms), a, b=b)

    def _reduce(self, stage: Reduce, x: str) -> str:
        if stage.dim is None:
            forms = {"sum": ["torch.sum({x})", "{x}.sum()"], "mean": ["torch.mean({x})", "{x}.mean()"]}
            return self.fn(self.choice(forms[stage.kind]), x)
        d = self.scalar(stage.dim)
        keep = ", keepdim=True" if stage.keepdim else ""
        forms = {
            "sum": ["torch.sum({x}, dim={d}{k})", "{x}.sum(dim={d}{k})", "{x}.sum({d}{k})"],
            "mean": ["torch.mean({x}, dim={d}{k})", "{x}.mean(dim={d}{k})", "{x}.mean({d}{k})"],
            "max": ["torch.amax({x}, dim={d}{k})", "{x}.amax({d}{k})", "torch.max({x}, dim={d}{k})[0]",
                    "torch.max({x}, dim={d}{k}).values", "{x}.max(dim={d}{k}).values"],
            "min": ["torch.amin({x}, dim={d}{k})", "{x}.amin({d}{k})", "torch.min({x}, dim={d}{k})[0]",
                    "torch.min({x}, dim={d}{k}).values", "{x}.min(dim={d}{k}).values"],
            "argmax": ["torch.argmax({x}, dim={d}{k})", "{x}.argmax(dim={d}{k})"],
            "argmin": ["torch.argmin({x}, dim={d}{k})", "{x}.argmin(dim={d}{k})"],
            "norm": ["torch.norm({x}, p=2, dim={d}{k})", "torch.linalg.vector_norm({x}, dim={d}{k})",
                     "{x}.norm(dim={d}{k})", "torch.linalg.norm({x}, dim={d}{k})"],
            "logsumexp": ["torch.logsumexp({x}, dim={d}{k})", "{x}.logsumexp({d}{k})"],
            "var": ["torch.var({x}, dim={d}{k})", "{x}.var(dim={d}{k})", "{x}.var({d}{k})"],
            "std": ["torch.std({x}, dim={d}{k})", "{x}.std(dim={d}{k})", "{x}.std({d}{k})"],
        }
        return self.fn(self.choice(forms[stage.kind]), x, d=d, k=keep)

    def _softmax(self, stage: Softmax, x: str) -> str:
        name = "log_softmax" if stage.log else "softmax"
        if self.rng.random() < 0.25:
            cls = "LogSoftmax" if stage.log else "Softmax"
            holder = self.module(f"nn.{cls}(dim={self.scalar(stage.dim, in_init=True)})", (name, name.replace("_", "")))
            return f"{holder}({x})"
        forms = [f"torch.{name}({{x}}, dim={{d}})", f"F.{name}({{x}}, dim={{d}})", f"{{x}}.{name}(dim={{d}})"]
        return self.fn(self.choice(forms), x, d=self.scalar(stage.dim))

    def _norm(self, stage: Norm, x: str) -> str:
        cls = "LayerNorm" if stage.kind == "layer_norm" else "RMSNorm"
        if stage.module:
            self.attrs.add(stage.attr)
            self.init_lines.append(
                InitLine(f"self.{stage.attr} = nn.{cls}({stage.shape_arg}, eps={stage.eps!r}{self.dtype_kw()})", True)
            )
            return f"self.{stage.attr}({x})"
        for attr in (stage.weight_attr, stage.bias_attr):
            if attr:
                self.declare_param(attr)
        self.uses_f = True
        w = f"self.{stage.weight_attr}"
        if stage.kind == "layer_norm":
            return f"F.layer_norm({x}, {w}.shape, {w}, self.{stage.bias_attr}, eps={stage.eps!r})"
        return f"F.rms_norm({x}, {w}.shape, {w}, eps={stage.eps!r})"

    def _scan(self, stage: Scan, x: str) -> str:
        d = self.scalar(stage.dim)
        forms = {
            "cumsum": ["torch.cumsum({x}, dim={d})", "{x}.cumsum({d})", "{x}.cumsum(dim={d})"],
            "cumprod": ["torch.cumprod({x}, dim={d})", "{x}.cumprod({d})", "{x}.cumprod(dim={d})"],
            "cummax": ["torch.cummax({x}, dim={d})[0]", "torch.cummax({x}, dim={d}).values", "{x}.cummax({d}).values"],
            "cummin": ["torch.cummin({x}, dim={d})[0]", "torch.cummin({x}, dim={d}).values", "{x}.cummin({d}).values"],
            "logcumsumexp": ["torch.logcumsumexp({x}, dim={d})", "{x}.logcumsumexp({d})", "{x}.logcumsumexp(dim={d})"],
        }
        return self.fn(self.choice(forms[stage.kind]), x, d=d)

    def _permute(self, stage: Permute, x: str) -> str:
        if stage.transpose:
            a, b = stage.transpose
            forms = ["{x}.transpose({a}, {b})", "torch.transpose({x}, {a}, {b})"]
            if len(stage.dims) == 2:
                forms += ["{x}.t()", "{x}.T"]
            moved = self.fn(self.choice(forms), x, a=str(a), b=str(b))
        else:
            dims = ", ".join(map(str, stage.dims))
            moved = self.fn(self.choice(["{x}.permute({d})", "torch.permute({x}, ({d}))"]), x, d=dims)
        return f"{moved}.contiguous()"

    def _cat(self, stage: Cat, x: str) -> str:
        items = ", ".join((x,) + stage.others)
        forms = ["torch.cat([{i}], dim={d})", "torch.cat(({i}), {d})", "torch.concat([{i}], dim={d})"]
        return self.choice(forms).format(i=items, d=stage.dim)

    def _indexselect(self, stage: IndexSelect, x: str) -> str:
        forms = ["torch.index_select({x}, {d}, {i})", "{x}.index_select({d}, {i})"]
        return self.fn(self.choice(forms), x, d=str(stage.dim), i=stage.index)

    def _gather(self, stage: Gather, x: str) -> str:
        forms = ["torch.gather({x}, {d}, {i})", "{x}.gather({d}, {i})", "torch.take_along_dim({x}, {i}, dim={d})"]
        return self.fn(self.choice(forms), x, d=str(stage.dim), i=stage.index)

    def _cosinesimilarity(self, stage: CosineSimilarity, x: str) -> str:
        if self.rng.random() < 0.25:
            holder = self.module(f"nn.CosineSimilarity(dim={stage.dim})", ("cosine", "cos_sim", "similarity"))
            return f"{holder}({x}, {stage.other})"
        forms = ["F.cosine_similarity({x}, {o}, dim={d})", "torch.cosine_similarity({x}, {o}, dim={d})"]
        return self.fn(self.choice(forms), x, o=stage.other, d=str(stage.dim))

    def _loss(self, stage: Loss, x: str) -> str:
        kwargs = [] if stage.reduction == "mean" else [f"reduction={stage.reduction!r}"]
        modules = {"mse_loss": "MSELoss", "l1_loss": "L1Loss", "huber_loss": "HuberLoss",
                   "cross_entropy": "CrossEntropyLoss", "kl_div": "KLDivLoss"}
        if stage.kind == "huber_loss":
            kwargs.insert(0, f"delta={self.scalar(stage.delta)}")
        if self.rng.random() < 0.3:
            init_kwargs = [k.replace("self.", "") for k in kwargs]
            ctor = f"nn.{modules[stage.kind]}({', '.join(init_kwargs)})"
            holder = self.module(ctor, ("loss_fn", "criterion", "loss"))
            return f"{holder}({x}, {stage.target})"
        prefix = self.choice(["F.", "torch.nn.functional."])
        plain_huber = stage.kind == "huber_loss" and stage.delta.init is None and stage.delta.value == 1.0
        if plain_huber and self.rng.random() < 0.5:  # smooth_l1_loss with beta=1 is huber_loss with delta=1
            return self.fn(f"{prefix}smooth_l1_loss({{x}}, {{t}}{{k}})", x, t=stage.target,
                           k="".join(", " + k for k in kwargs[1:]))
        extra = "".join(", " + k for k in kwargs)
        return self.fn(f"{prefix}{stage.kind}({{x}}, {{t}}{{k}})", x, t=stage.target, k=extra)

    # -- the module ------------------------------------------------------------------------------
    def write(self) -> Reference:
        p = self.p
        self.spell = _constant_names(p)
        value = p.inputs[0].name
        nested = len(p.stages) <= 2 and self.rng.random() < 0.5
        body: list[str] = []
        expr = value
        for stage in p.stages:
            expr = self.stage(stage, expr)
            if not nested:
                body.append(f"{value} = {expr}")
                expr = value
        for param in p.params:  # parameters no stage used still belong to the module
            self.declare_param(param.attr)
        if nested:
            body.append(f"return {expr}")
        else:
            body[-1] = "return " + body[-1].split(" = ", 1)[1]
        return self._module(body)

    def _module(self, forward_body: list[str]) -> Reference:
        p, rng = self.p, self.rng
        imports = ["import torch", "import torch.nn as nn"]
        if self.uses_f:
            imports.append("import torch.nn.functional as F")
        hints = rng.random() < 0.5
        init_params = []
        for arg in p.init_args:
            hint = ""
            if hints:
                hint = ": int" if arg.dim or isinstance(arg.value, int) else ": tuple" if arg.shape else ": float"
            init_params.append(f"{arg.name}{hint}")
        scalar_stores = [InitLine(f"self.{a.name} = {a.name}", True) for a in p.init_args if a.is_scalar]
        init_lines = tuple(scalar_stores + self.init_lines)
        desc = p.description or "a small computation"
        doc = rng.choice([
            f'{INDENT}"""\n{INDENT}Simple model that {desc}.\n{INDENT}"""',
            f'{INDENT}"""{desc[0].upper() + desc[1:]}."""',
            f'{INDENT}"""\n{INDENT}A model that {desc}.\n{INDENT}"""',
        ])
        sup = rng.choice(["super(Model, self).__init__()", "super().__init__()"])
        args = ", ".join(("self",) + tuple(init_params))
        lines = imports + ["", "", "class Model(nn.Module):", doc, ""]
        lines.append(f"{INDENT}def __init__({args}):")
        lines += [f"{INDENT * 2}{sup}"] + [f"{INDENT * 2}{line.text}" for line in init_lines]
        forward_args = ", ".join(f"{t.name}: torch.Tensor" if hints else t.name for t in p.inputs)
        ret = " -> torch.Tensor" if hints else ""
        lines += ["", f"{INDENT}def forward(self, {forward_args}){ret}:"]
        if rng.random() < 0.4:
            lines.append(f'{INDENT * 2}"""{desc[0].upper() + desc[1:]}."""')
        lines += [f"{INDENT * 2}{line}" for line in forward_body]
        lines += ["", ""] + _constants_source(p, self.spell).splitlines() + ["", ""]
        code = "\n".join(lines) + "\n"
        code += get_inputs_source(p, self.spell, inline=rng.random() < 0.5) + "\n\n" + init_inputs_source(p, self.spell)
        return Reference(code, tuple(a.name for a in p.init_args), init_lines, self.spell, tuple(self.expressed))


def _constant_names(p: Program) -> dict[str, str]:
    spell: dict[str, str] = {}
    for d in p.dims:
        spell[d.key] = d.name if d.name else str(d.size)
    for arg in p.init_args:
        if arg.dim:
            spell[f"init:{arg.name}"] = spell[arg.dim]
        else:
            spell[f"init:{arg.name}"] = arg.name
    return spell


def _constants_source(p: Program, spell: dict[str, str]) -> str:
    lines = [f"{d.name} = {d.size}" for d in p.dims if d.name]
    for arg in p.init_args:
        if arg.shape is not None:
            items = [spell[d] if isinstance(d, str) else str(d) for d in arg.shape]
            lines.append(f"{arg.name} = ({', '.join(items)}{',' if len(items) == 1 else ''})")
        elif arg.dim is None:
            lines.append(f"{arg.name} = {arg.value!r}")
    return "\n".join(lines) + "\n"


def render_reference(program: Program, rng: random.Random, spelling: str = "any") -> Reference:
    """The KernelBench module for `program`; the spelling is drawn from `rng` (see SPELLINGS)."""
    return _Writer(program, rng, spelling).write()
