"""Building blocks of the teacher's kernels: a kernel's parameters and launch arguments kept in step,
and the translation of elementwise stages into kernel statements through the shared table.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from jaxrl.data.engine.ir import Arith, Operand, Pointwise, Scalar
from jaxrl.data.engine.pointwise import ARITH_SYMBOLS, pointwise

BODY = "    "


@dataclasses.dataclass(frozen=True)
class Term:
    """A teacher-only elementwise step (a loss term): kernel statements on `{x}`, optionally reading
    the register of `operand` as `{y}` and numbers as named placeholders."""

    name: str
    statements: tuple[str, ...]
    operand: Operand | None = None
    params: tuple[tuple[str, Scalar], ...] = ()


Elementwise = Pointwise | Arith | Term


class Kernel:
    """One `@triton.jit` function: its parameters, the matching launch arguments and its body."""

    def __init__(self, name: str):
        self.name = name
        self.params: list[str] = []
        self.args: list[str] = []
        self.meta: list[tuple[str, str]] = []
        self.body: list[str] = []
        self.helpers: set[str] = set()
        self._temps = 0

    def _add(self, param: str, arg: str) -> None:
        if param in self.params:
            raise ValueError(f"kernel {self.name}: parameter {param!r} declared twice")
        self.params.append(param)
        self.args.append(arg)

    def ptr(self, name: str, arg: str) -> str:
        self._add(f"{name}_ptr", arg)
        return f"{name}_ptr"

    def value(self, name: str, arg: str) -> str:
        if name not in self.params:
            self._add(name, arg)
        return name

    def constexpr(self, name: str, arg: str) -> str:
        self.params.append(f"{name}: tl.constexpr")
        self.meta.append((name, arg))
        return name

    def temp(self, stem: str = "t") -> str:
        self._temps += 1
        return f"{stem}{self._temps}"

    def line(self, text: str) -> None:
        self.body.append(text)

    def source(self) -> str:
        header = _wrap(f"@triton.jit\ndef {self.name}(", self.params, "):", first_width=len(self.name) + 5)
        return header + "\n" + "\n".join(BODY + line if line else "" for line in self.body) + "\n"

    def launch(self, grid: str, indent: int = 8, **launch_options: str) -> str:
        """The launch statement, for a body indented by `indent` spaces (forward's, by default)."""
        parts = self.args + [f"{k}={v}" for k, v in self.meta] + [f"{k}={v}" for k, v in launch_options.items()]
        return _wrap(f"{self.name}[{grid}](", parts, ")", first_width=indent + len(self.name) + len(grid) + 3,
                     width=100 - indent)


def _wrap(head: str, items: list[str], tail: str, first_width: int, width: int = 100) -> str:
    """`head` + items + `tail` on one line when it fits, else items packed on indented lines."""
    if first_width + sum(len(i) + 2 for i in items) + len(tail) <= width:
        return head + ", ".join(items) + tail
    lines, line = [], BODY
    for item in items:
        if len(line) + len(item) + 2 > width and line.strip():
            lines.append(line.rstrip())
            line = BODY
        line += item + ", "
    lines.append(line.rstrip().rstrip(","))
    return head + "\n" + "\n".join(lines) + "\n" + tail


def scalar_expr(kernel: Kernel, value: Scalar) -> str:
    """A number inside a kernel: a literal, or a kernel argument fed from self.<init>."""
    if value.init is None:
        return repr(float(value.value))
    return kernel.value(value.init, f"self.{value.init}")


OperandLoader = Callable[[Operand], str]


def chain(kernel: Kernel, stages: list[Elementwise], var: str, load: OperandLoader) -> list[str]:
    """Kernel statements applying `stages` to the float32 variable `var`, in order.

    Operators come from the shared table (`pointwise.POINTWISE`); tensors the value is combined with are
    loaded through `load`, which depends on how the kernel indexes them.
    """
    lines: list[str] = []
    for stage in stages:
        if isinstance(stage, Pointwise):
            op = pointwise(stage.op)
            values = {name: scalar_expr(kernel, value) for name, value in stage.params}
            temp = kernel.temp()
            lines += [s.format(x=var, t=temp, **values) for s in op.triton]
        elif isinstance(stage, Arith):
            other = scalar_expr(kernel, stage.other) if isinstance(stage.other, Scalar) else load(stage.other)
            left, right = (other, var) if stage.reverse else (var, other)
            lines.append(f"{var} = {left} {ARITH_SYMBOLS[stage.op]} {right}")
        elif isinstance(stage, Term):
            values = {name: scalar_expr(kernel, value) for name, value in stage.params}
            other = load(stage.operand) if stage.operand else ""
            temp = kernel.temp()
            lines += [s.format(x=var, y=other, t=temp, **values) for s in stage.statements]
        else:
            raise TypeError(f"not an elementwise stage: {stage!r}")
    return lines


def describe(stages: list[Elementwise]) -> list[str]:
    """Each elementwise step as a short formula on x, for plans: "relu", "x * scale_factor", "1.0 - x"."""
    names = []
    for stage in stages:
        if isinstance(stage, Pointwise):
            names.append(stage.op)
        elif isinstance(stage, Arith):
            if isinstance(stage.other, Scalar):
                other = stage.other.init or repr(float(stage.other.value))
            else:
                other = stage.other.name + ("" if stage.other.axes is None else " (broadcast)")
            left, right = (other, "x") if stage.reverse else ("x", other)
            names.append(f"{left} {ARITH_SYMBOLS[stage.op]} {right}")
        else:
            names.append(f"the {stage.name.replace('_', ' ')} term")
    return names
