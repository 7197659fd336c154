"""What the kernel writers share while one solution is being written: the kernels so far, the lines of
`forward`, unique names, and how a tensor the value is combined with is found and indexed."""

from __future__ import annotations

import dataclasses
import random

from jaxrl.data.engine.ir import Operand, Program
from jaxrl.data.engine.teacher.kernel import Kernel

# Register names a kernel uses for itself; an operand with one of these names gets a suffix.
RESERVED = frozenset({
    "x", "acc", "offsets", "mask", "pid", "row", "cols", "offs", "idx", "r", "start", "tile", "best", "carry",
    "mean", "var", "rstd", "diff", "den", "num", "m", "s", "w", "b", "a", "y", "out", "k", "bias", "c",
})


ELEMENTWISE_LAYOUTS = ("flat", "tiled2d", "grid_stride")


@dataclasses.dataclass(frozen=True)
class Scale:
    """How the teacher writes a solution: block sizes for the problem's scale (sizes the interpreter runs
    quickly, or a GPU's) and the design decisions that make its solutions differ from task to task.

    elementwise_layout: `flat` (one program per block of the flattened tensor), `tiled2d` (a 2-D grid of
    BLOCK_R x BLOCK_C tiles over (rows, last axis)) or `grid_stride` (a fixed number of programs, each
    looping over several blocks); matmul_group_m: 0 walks output tiles row by row, > 0 visits them in
    groups of that many tile rows (an L2-friendly order); fuse: elementwise steps go into the neighbouring
    kernel's prologue or epilogue (else each chain is its own kernel, one more round trip through memory).
    """

    name: str
    elementwise_block: int
    reduce_block: int
    matmul_blocks: tuple[int, int, int]
    matmul_warps: int
    matmul_stages: int
    elementwise_layout: str = "flat"
    elementwise_warps: int = 4
    matmul_group_m: int = 0
    fuse: bool = True


def scale_config(scale: str, dtype: str) -> Scale:
    """The canonical strategy of a scale and dtype."""
    if scale == "cpu":
        return Scale("cpu", 1024, 1024, (32, 32, 32), 4, 2)
    if dtype == "float32":
        return Scale("full", 1024, 4096, (64, 64, 32), 4, 3)
    return Scale("full", 1024, 4096, (128, 128, 64), 8, 3)


def draw_strategy(scale: str, dtype: str, rng: random.Random) -> Scale:
    """One of the teacher's genuinely different designs for this scale, drawn from `rng`."""
    base = scale_config(scale, dtype)
    if scale == "cpu":
        tiles = [(32, 32, 32), (32, 64, 32), (64, 32, 16), (16, 32, 32)]
    elif dtype == "float32":
        tiles = [(64, 64, 32), (128, 64, 32), (64, 128, 32), (32, 64, 32)]
    else:
        tiles = [(128, 128, 64), (128, 64, 32), (64, 128, 64), (64, 64, 64)]
    return dataclasses.replace(
        base,
        elementwise_block=rng.choice([256, 512, 1024, 2048]),
        reduce_block=rng.choice([128, 256, 512, 1024] if scale == "cpu" else [1024, 2048, 4096]),
        elementwise_layout=rng.choice(ELEMENTWISE_LAYOUTS),
        elementwise_warps=rng.choice([2, 4, 8]),
        matmul_blocks=rng.choice(tiles),
        matmul_warps=rng.choice([4, 8]),
        matmul_group_m=rng.choice([0, 8]),
        fuse=rng.random() < 0.7,
    )


@dataclasses.dataclass
class GroupCode:
    out: str  # the forward variable holding the group's result
    plan: str  # one sentence on what the kernel does


class Emitter:
    def __init__(self, program: Program, scale: str, config: Scale | None = None):
        self.program = program
        self.config = config or scale_config(scale, program.dtype)
        self.kernels: list[Kernel] = []
        self.helpers: list[str] = []  # @triton.jit helper functions (scan combiners), each once
        self.forward: list[str] = []
        self._names: set[str] = set()
        self._values = 0

    def kernel(self, stem: str) -> Kernel:
        name, n = f"{stem}_kernel", 2
        while name in self._names:
            name, n = f"{stem}{n}_kernel", n + 1
        self._names.add(name)
        kernel = Kernel(name)
        self.kernels.append(kernel)
        return kernel

    def new_value(self, final: bool) -> str:
        if final:
            return "out"
        self._values += 1
        return f"h{self._values}" if self._values > 1 else "h"

    def line(self, text: str) -> None:
        self.forward.extend(text.splitlines())

    @staticmethod
    def operand_expr(operand: Operand) -> str:
        return f"self.{operand.name}" if operand.source == "param" else operand.name

    @staticmethod
    def register(name: str) -> str:
        return f"{name}_v" if name in RESERVED else name

    @property
    def torch_dtype(self) -> str:
        return f"torch.{self.program.dtype}"


def flat_loader(kernel: Kernel, value: str, rank: int, offsets: str = "offsets", mask: str = "mask"):
    """Loads operands for a kernel that walks the contiguous value as a flat array of `offsets`.

    An operand spanning axes [a, e) of the value (ones elsewhere) is read at (offsets // inner) % span, where
    inner = value.stride(e - 1) is the number of elements after those axes; a full-shape operand at offsets.
    """
    loaded: dict[str, str] = {}

    def load(operand: Operand) -> str:
        if operand.name in loaded:
            return loaded[operand.name]
        expr = Emitter.operand_expr(operand)
        register = Emitter.register(operand.name)
        ptr = kernel.ptr(register, expr)
        if operand.axes is None:
            index = offsets
        else:
            start, stop = operand.axes
            span = kernel.value(f"{operand.name}_numel", f"{expr}.numel()")
            if stop == rank:
                index = f"{offsets} % {span}"
            else:
                inner = kernel.value(f"{operand.name}_inner", f"{value}.stride({stop - 1})")
                index = f"({offsets} // {inner}) % {span}"
        kernel.line(f"{register} = tl.load({ptr} + {index}, mask={mask}, other=0.0).to(tl.float32)")
        loaded[operand.name] = register
        return register

    return load
