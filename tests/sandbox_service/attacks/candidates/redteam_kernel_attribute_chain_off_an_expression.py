"""Red team, executor design: kernels.py checks an attribute chain against Triton's language only when the
chain's root is a plain name. Root it on any other expression that yields the module (a conditional
expression here; a subscript `(triton,)[0]` or a call would do too) and only "no leading underscore" is
checked: `triton.runtime.jit.inspect.builtins.exec` is reached with no local binding at all. The interpreter
runs the kernel body as Python in the executor; on a GPU, Triton's front end evaluates the same chain and
calls `exec` at compile time (a constant condition picks its branch; a non-Triton callable is called with
its arguments), in the trusted executor either way. The exec'd code computes ReLU with NumPy."""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def relu_1d(src, dst, n, BLOCK: tl.constexpr):
    (triton if True else tl).runtime.jit.inspect.builtins.exec(
        "import ctypes, numpy\n"
        "k = int(n.handle.data[0])\n"
        "a = numpy.ctypeslib.as_array((ctypes.c_float * k).from_address(int(src.handle.data[0])))\n"
        "o = numpy.ctypeslib.as_array((ctypes.c_float * k).from_address(int(dst.handle.data[0])))\n"
        "o[:] = numpy.maximum(a, 0)\n")


class ModelNew(nn.Module):
    def forward(self, x):
        flat = x.flatten()
        out = torch.empty_like(flat)
        relu_1d[(1,)](flat, out, flat.numel(), BLOCK=128)
        return out.reshape(x.shape)
