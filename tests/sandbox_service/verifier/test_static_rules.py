"""Layer 2, static: AST rules on the candidate source, without running it.

Specification by example: every rule has snippets that must trigger it (on the line marked `# <-`),
honest glue must never trigger anything under either policy, and the corpus in
tests/sandbox_service/corpus/ is checked candidate by candidate against its manifest.
"""

from __future__ import annotations

import ast
import re
import textwrap
from pathlib import Path

import pytest
import yaml

from sandbox_service.options import Policy
from sandbox_service.verifier.static_rules import RULES, check_static

REPO = Path(__file__).resolve().parents[3]
CORPUS = REPO / "tests" / "sandbox_service" / "corpus"
MANIFEST = yaml.safe_load((CORPUS / "manifest.yaml").read_text())["candidates"]

HEADER = '''\
import torch
import torch.nn as nn
import torch.nn.functional as F
import triton
import triton.language as tl


@triton.jit
def copy_kernel(src, dst, n, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(dst + i, tl.load(src + i, mask=i < n), mask=i < n)


def launch(x):
    out = torch.empty_like(x)
    copy_kernel[(triton.cdiv(x.numel(), 256),)](x, out, x.numel(), BLOCK=256)
    return out
'''


def candidate(forward: str, init: str = "", prelude: str = "", params: str = "x", members: str = "", decorator: str = "") -> str:
    """A complete module: HEADER, `prelude` at module level, and ModelNew with the given bodies, extra class
    `members`, and a `decorator` line on forward."""
    init_body = textwrap.indent(textwrap.dedent(init).strip() or "pass", " " * 8)
    forward_body = textwrap.indent(textwrap.dedent(forward).strip(), " " * 8)
    extra = textwrap.indent(textwrap.dedent(members).strip(), " " * 4) + "\n\n" if members.strip() else ""
    return (
        HEADER
        + "\n" + textwrap.dedent(prelude).strip() + "\n\n\n"
        + "class ModelNew(nn.Module):\n" + extra
        + "    def __init__(self):\n        super().__init__()\n" + init_body + "\n\n"
        + (f"    {decorator}\n" if decorator else "")
        + f"    def forward(self, {params}):\n" + forward_body + "\n"
    )


def found(code: str, policy: Policy = Policy.STRICT) -> dict[str, list[int]]:
    lines: dict[str, list[int]] = {}
    for violation in check_static(code, policy):
        assert violation.layer == "static"
        lines.setdefault(violation.rule, []).append(violation.line)
    return lines


def marked_line(code: str) -> int | None:
    for number, line in enumerate(code.splitlines(), start=1):
        if line.rstrip().endswith("# <-"):
            return number
    return None


# (rule, code): the rule must be reported, on the line marked `# <-` when there is one.
TRIGGERS = [
    # --- torch compute on the forward path (strict policy) -------------------------------------------------
    ("torch-compute-call", candidate("return torch.matmul(launch(x), x)  # <-")),
    ("torch-compute-call", candidate("return torch.linalg.norm(launch(x))  # <-")),
    ("torch-compute-call", candidate("return mm(launch(x), x)  # <-", prelude="mm = torch.matmul")),
    ("torch-compute-call", candidate("return triton_mm(launch(x), x)  # <-", prelude="from torch import matmul as triton_mm")),
    ("torch-compute-call", candidate('return getattr(torch, "softmax")(launch(x), dim=1)  # <-')),
    ("torch-compute-call", candidate('return OPS["act"](launch(x))  # <-', prelude='OPS = {"act": torch.tanh}')),
    ("torch-compute-call", candidate("return self.op(launch(x), x)  # <-", init="self.op = torch.bmm")),
    ("torch-compute-call", candidate("return soft(launch(x))  # <-", prelude="import functools\nsoft = functools.partial(torch.softmax, dim=-1)")),
    ("torch-compute-call", candidate("return relu(launch(x))  # <-", prelude="from torch import *")),
    ("torch-compute-call", candidate("return helper(launch(x))", prelude="def helper(t):\n    return inner(t)\n\ndef inner(t):\n    return torch.exp(t)  # <-")),
    ("torch-compute-call", candidate("return self.ref(x)", prelude="class Model(nn.Module):\n    def forward(self, x):\n        launch(x)\n        return torch.sigmoid(x)  # <-", init="self.ref = Model()")),
    ("torch-compute-call", candidate("return torch.add(launch(x), 1, out=launch(x))  # <-")),
    ("torch-compute-call", candidate("return torch.matmul.__call__(launch(x), x)  # <-")),
    ("torch-compute-call", candidate("return act(launch(x))  # <-", params="x, act=torch.relu")),
    ("torch-compute-call", HEADER + "\nclass ModelNew(nn.Module):\n    forward = staticmethod(torch.relu)  # <-\n"),
    ("torch-compute-call", candidate("self._x = x\nreturn self.result", members="@property\ndef result(self):\n    return torch.relu(launch(self._x))  # <-")),
    ("torch-compute-call", candidate("return self.act(launch(x))  # <-", members="def __getattr__(self, name):\n    return torch.relu")),
    ("torch-compute-call", candidate("return launch(x)", decorator="@swap", prelude="def swap(fn):\n    def inner(self, *args):\n        return torch.relu(*args)  # <-\n    return inner")),
    ("torch-compute-call", candidate("launch(x)\nreturn nn.Module.__call__(self.ref, x)", prelude="class Model(nn.Module):\n    def forward(self, x):\n        return torch.tanh(x)  # <-", init="self.ref = Model()")),
    ("torch-functional-call", candidate("return F.gelu(launch(x))  # <-")),
    ("torch-functional-call", candidate("return torch.nn.functional.conv1d(launch(x), x)  # <-")),
    ("torch-ops-call", candidate("return torch.ops.aten.mm.default(launch(x), x)  # <-")),
    ("nn-layer-call", candidate("return self.fc(launch(x))  # <-", init="self.fc = nn.Linear(4, 4)")),
    ("nn-layer-call", candidate("return self.body(launch(x))  # <-", init="self.body = nn.Sequential(nn.Linear(4, 4), nn.ReLU())")),
    ("nn-layer-call", candidate("return nn.ReLU()(launch(x))  # <-")),
    ("nn-layer-call", candidate("return self.fc.forward(launch(x))  # <-", init="self.fc = nn.Conv2d(3, 3, 1)")),
    ("tensor-method-call", candidate("return launch(x).sum(dim=1)  # <-")),
    ("tensor-method-call", candidate("return launch(x).__matmul__(x)  # <-")),
    ("tensor-method-call", candidate("return type(x).matmul(launch(x), x)  # <-")),
    ("tensor-method-call", candidate("y = launch(x)\nreturn y.cpu().numpy()  # <-")),
    ("tensor-method-call", candidate("return self.w.exp()  # <-", init="self.w = nn.Parameter(torch.randn(4))")),
    ("tensor-method-call", candidate("return Fn.apply(launch(x))", prelude="class Fn(torch.autograd.Function):\n    @staticmethod\n    def forward(ctx, t):\n        return t.clamp(min=0)  # <-")),
    ("tensor-method-call", candidate("values = launch(x).tolist()  # <-\nreturn torch.tensor(values)")),
    ("tensor-method-call", candidate("import torch.utils.checkpoint as cp\nreturn cp.checkpoint(lambda t: t.sum(1), launch(x))  # <-")),
    ("tensor-method-call", candidate("return x.__class__.__add__(launch(x), x)  # <-")),
    ("tensor-method-call", candidate("return runner(x).__add__(launch(x))  # <-", prelude="from triton.testing import do_bench as runner")),
    ("tensor-method-call", candidate("return self.__class__.helper(self, launch(x))", members="def helper(self, t):\n    return t.sum()  # <-")),
    ("tensor-operator", candidate("return launch(x) @ x  # <-")),
    ("tensor-operator", candidate("return launch(x) + x  # <-")),
    ("tensor-operator", candidate("y = launch(x)\ny *= 2  # <-\nreturn y")),
    ("tensor-operator", candidate("return -launch(x)  # <-")),
    ("tensor-operator", candidate("return launch(x) > 0  # <-")),
    ("tensor-operator", candidate("return sum(launch(x).unbind(0))  # <-")),
    ("tensor-operator", candidate("return op.mul(launch(x), 2)  # <-", prelude="import operator as op")),
    ("tensor-operator", candidate("return self.f(launch(x), x)", init="self.f = lambda a, b: a * b  # <-")),
    ("tensor-operator", candidate("return launch(x)[idx]  # <-", params="x, idx")),
    ("tensor-operator", candidate("return a @ b  # <-", params="a, b")),
    ("foreign-compute-call", candidate("return torch.from_numpy(np.tanh(launch(x)))  # <-", prelude="import numpy as np")),
    # --- delegation and fallbacks ---------------------------------------------------------------------------
    ("no-kernel-launch", candidate("return x.clone()")),
    ("no-kernel-launch", """
import torch
import torch.nn as nn


class _Runner:
    def __init__(self, fn):
        self.fn = fn

    def __getitem__(self, grid):
        return self.fn


class triton:  # a fake `triton` whose "kernels" are Python functions
    @staticmethod
    def jit(fn):
        return _Runner(fn)


@triton.jit
def kernel(x, out):
    out.copy_(torch.relu(x))


class ModelNew(nn.Module):
    def forward(self, x):  # <-
        out = torch.empty_like(x)
        kernel[(1,)](x, out)
        return out
"""),
    ("reference-delegation", candidate("launch(x)\nreturn super().forward(x)  # <-")),
    ("reference-delegation", HEADER + "\nclass Model(nn.Module):\n    def forward(self, x):\n        return torch.relu(x)\n\n\nclass ModelNew(Model):  # <-\n    def forward(self, x):\n        return launch(x)\n"),
    ("reference-delegation", HEADER + "\nclass ModelNew(nn.Linear):  # <-\n    def __init__(self):\n        super().__init__(4, 4)\n"),
    ("reference-delegation", HEADER + "\nfrom torch.nn import Linear as ModelNew  # <-\n"),
    ("forward-rebinding", candidate("return launch(x)", init="self.forward = torch.relu  # <-")),
    ("forward-rebinding", candidate("return launch(x)", init="self.register_forward_hook(lambda m, i, o: o * 0)  # <-")),
    ("forward-rebinding", candidate("return launch(x)", init="setattr(self, 'forward', lambda t: t)  # <-")),
    ("forward-rebinding", candidate("return launch(x)", init="self._forward_hooks[0] = lambda m, i, o: o  # <-")),
    ("forward-rebinding", candidate("return launch(x)", members="def __getattribute__(self, name):\n    return nn.Module.__getattribute__(self, name)").replace("class ModelNew(nn.Module):", "class ModelNew(nn.Module):  # <-")),
    ("forward-rebinding", HEADER + "\nclass Meta(type):\n    pass\n\n\nclass ModelNew(nn.Module, metaclass=Meta):  # <-\n    def forward(self, x):\n        return launch(x)\n"),
    ("forward-rebinding", candidate("return launch(x)", members="def __new__(cls, *args):\n    return nn.Identity()").replace("class ModelNew(nn.Module):", "class ModelNew(nn.Module):  # <-")),
    ("exception-fallback", candidate("try:  # <-\n    return launch(x)\nexcept Exception:\n    return x.relu()")),
    ("exception-fallback", candidate("import contextlib\nwith contextlib.suppress(RuntimeError):  # <-\n    return launch(x)\nreturn x")),
    ("exception-fallback", candidate("return helper(x)", prelude="def helper(t):\n    try:  # <-\n        return launch(t)\n    except RuntimeError:\n        return t")),
    ("torch-compiler", candidate("return self.f(launch(x))", init="self.f = torch.compile(lambda t: t)  # <-")),
    ("torch-compiler", candidate("return extern_kernels.mm(launch(x), x)", prelude="from torch._inductor.select_algorithm import extern_kernels  # <-")),
    ("torch-compiler", candidate("return launch(x)", prelude="from torch.utils.cpp_extension import load_inline  # <-")),
    ("torch-compiler", candidate("return launch(x)", init="self.s = torch.jit.script(nn.Identity())  # <-")),
    ("torch-private-api", candidate("return torch._C._nn.gelu(launch(x))  # <-")),
    ("foreign-import", candidate("return launch(x)", prelude="from reference import Model  # <-")),
    ("foreign-import", candidate("return launch(x)", prelude="import flash_attn  # <-")),
    ("foreign-import", candidate("return launch(x)", prelude="from . import helpers  # <-")),
    ("foreign-import", candidate("return launch(x)", prelude="from sandbox_service import results  # <-")),
    ("foreign-import", candidate("return launch(x)", prelude="import logging  # <-")),
    ("foreign-import", candidate("return launch(x)", prelude="import numpy as np  # <-")),
    ("foreign-import", candidate("return launch(x)", prelude="from torch.utils.checkpoint import checkpoint  # <-")),
    ("module-attribute", candidate("return launch(x)", init="torch.os.system('true')  # <-")),
    ("module-attribute", candidate("return launch(x)", init="self.frames = torch.inspect.stack()  # <-")),
    ("module-attribute", candidate("return launch(x)", init="self.gc = torch.importlib.import_module('gc')  # <-")),
    ("module-attribute", candidate("return launch(x)", prelude="import typing\nframe = typing.sys._getframe(0)  # <-")),
    ("module-attribute", candidate("return launch(x)", init="self.c = F.np.ctypeslib  # <-")),
    ("module-attribute", candidate("return launch(x)", init="self.r = torch.serialization.load('/tmp/out.pt')  # <-")),
    ("module-attribute", candidate("return launch(x)", init="self.k = triton.knobs  # <-")),
    ("module-attribute", candidate("return launch(x)", prelude="from torch import utils  # <-")),
    ("module-attribute", candidate("return launch(x)", init="self.m = torch.get_device_module('cuda')  # <-")),
    ("torch-compiler", candidate("return launch(x)", init="self.cu = torch.CompilationUnit('def f(x):\\n    return x')  # <-")),
    ("file-io", candidate("return launch(x)", init="self.t = torch.from_file('/tmp/ref.bin', size=4)  # <-")),
    ("precision-downgrade", candidate("return launch(x)", init="torch.set_autocast_enabled(True)  # <-")),
    ("module-attribute", candidate("return launch(x)", init="torch.backends.cuda.torch.os.system('true')  # <-")),
    # --- tampering ------------------------------------------------------------------------------------------
    ("monkeypatch", candidate("return launch(x)", prelude="torch.allclose = lambda *a, **k: True  # <-")),
    ("monkeypatch", candidate("return launch(x)", prelude="import time\ntime.perf_counter = lambda: 0.0  # <-")),
    ("monkeypatch", candidate("return launch(x)", prelude="T = torch.Tensor\nT.__eq__ = lambda a, b: True  # <-")),
    ("monkeypatch", candidate("return launch(x)", init="setattr(torch.testing, 'assert_close', print)  # <-")),
    ("monkeypatch", candidate("return launch(x)", prelude="import builtins\nbuiltins.isinstance = lambda *a: True  # <-")),
    ("monkeypatch", candidate("return launch(x)", prelude="del torch.nn.functional.relu  # <-")),
    ("monkeypatch", candidate("return launch(x)", prelude="import os\nos.environ['CUDA_VISIBLE_DEVICES'] = '1'  # <-")),
    ("monkeypatch", candidate("return launch(x)", prelude="triton.testing.do_bench = lambda *a, **k: 0.0  # <-")),
    ("monkeypatch", candidate("return launch(x)", prelude="torch.set_num_threads(1)  # <-")),
    ("tensor-subclass", candidate("return Lazy(launch(x))", prelude="class Lazy(torch.Tensor):  # <-\n    pass")),
    ("tensor-subclass", candidate("return launch(x)", prelude="class Mode:  # <-\n    def __torch_function__(self, *a):\n        return None")),
    ("tensor-subclass", candidate("y = launch(x)\ny.__class__ = Lazy  # <-\nreturn y", prelude="class Lazy:\n    pass")),
    ("tensor-subclass", candidate("return launch(x)", prelude="from torch.utils._python_dispatch import TorchDispatchMode  # <-")),
    ("identity-cache", candidate("k = x.data_ptr()\nif k in CACHE:  # <-\n    return CACHE[k]\nCACHE[k] = launch(x)\nreturn CACHE[k]", prelude="CACHE = {}")),
    ("identity-cache", candidate("if id(x) == self.last:  # <-\n    return self.out\nreturn launch(x)", init="self.last = None\nself.out = None")),
    ("identity-cache", candidate("if x is self.seen:  # <-\n    return self.out\nself.seen = x\nself.out = launch(x)\nreturn self.out", init="self.seen = None")),
    ("identity-cache", candidate("return self.memo.get(x.untyped_storage().data_ptr()) or launch(x)  # <-", init="self.memo = {}")),
    ("identity-cache", candidate("return cached(x)  # <-", prelude="import functools\n@functools.lru_cache(maxsize=None)\ndef cached(t):\n    return launch(t)")),
    ("identity-cache", candidate("return launch(x)", prelude="import weakref  # <-")),
    ("identity-cache", candidate("k = x._cdata\nif k in C:  # <-\n    return C[k]\nreturn launch(x)", prelude="C = {}")),
    ("identity-cache", candidate("k = str(x.data_ptr())\nif k in C:  # <-\n    return C[k]\nreturn launch(x)", prelude="C = {}")),
    ("identity-cache", candidate("k = x.data_ptr() + 0\nif k == self.k:  # <-\n    return self.o\nreturn launch(x)", init="self.k = 0\nself.o = None")),
    ("identity-cache", candidate("if torch.equal(x, self.last):  # <-\n    return self.out\nreturn launch(x)", init="self.last = None\nself.out = None")),
    ("identity-cache", candidate("self.store[x] = launch(x)  # <-\nreturn self.store[x]", init="self.store = {}")),
    ("input-mutation", candidate("x.mul_(2)  # <-\nreturn launch(x)")),
    ("input-mutation", candidate("x[0] = 0  # <-\nreturn launch(x)")),
    ("input-mutation", candidate("v = x.view(-1)\nv.zero_()  # <-\nreturn launch(x)")),
    ("input-mutation", candidate("x += 1  # <-\nreturn launch(x)")),
    ("input-mutation", candidate("torch.exp(launch(x), out=x)  # <-\nreturn x")),
    ("input-mutation", candidate("return helper(x)", prelude="def helper(t):\n    t.copy_(launch(t))  # <-\n    return t")),
    ("precision-downgrade", candidate("return launch(x.half()).float()  # <-")),
    ("precision-downgrade", candidate("return launch(x.to(torch.bfloat16))  # <-")),
    ("precision-downgrade", candidate("return launch(x.to(dtype=torch.float16))  # <-")),
    ("precision-downgrade", candidate("return launch(getattr(x, 'half')())  # <-")),
    ("precision-downgrade", candidate("return launch(x)", prelude="torch.backends.cuda.matmul.allow_tf32 = True  # <-")),
    ("precision-downgrade", candidate("return launch(x)", prelude="torch.set_float32_matmul_precision('medium')  # <-")),
    ("precision-downgrade", candidate("with torch.autocast('cuda'):  # <-\n    return launch(x)")),
    ("precision-downgrade", candidate("return launch(x)", init="self.half()  # <-")),
    ("side-stream", candidate("with torch.cuda.stream(self.s):  # <-\n    return launch(x)", init="self.s = None")),
    ("side-stream", candidate("return launch(x)", init="self.s = torch.cuda.Stream()  # <-")),
    ("side-stream", candidate("y = launch(x)\ny.record_stream(self.s)  # <-\nreturn y", init="self.s = None")),
    ("concurrency", candidate("return launch(x)", prelude="import threading  # <-")),
    ("concurrency", candidate("return launch(x)", prelude="from concurrent.futures import ThreadPoolExecutor  # <-")),
    ("concurrency", candidate("return launch(x)", prelude="import multiprocessing as mp  # <-")),
    ("rng-manipulation", candidate("torch.manual_seed(0)  # <-\nreturn launch(x)")),
    ("rng-manipulation", candidate("return launch(x)", init="self.g = torch.Generator().manual_seed(42)  # <-")),
    ("rng-manipulation", candidate("return launch(x)", init="torch.cuda.set_rng_state(torch.cuda.get_rng_state())  # <-")),
    ("precomputed-output", candidate("return self.answer", init="self.answer = launch(*get_inputs())  # <-", prelude="def get_inputs():\n    return [torch.randn(4)]")),
    ("precomputed-output", candidate("return launch(x)", prelude="def get_inputs():\n    return [torch.randn(4)]\n\nINPUTS = get_inputs()  # <-")),
    # --- escapes --------------------------------------------------------------------------------------------
    ("dynamic-code", candidate("return launch(x)", init="exec('import os')  # <-")),
    ("dynamic-code", candidate("return eval('torch.relu')(launch(x))  # <-")),
    ("dynamic-code", candidate("return launch(x)", prelude="import importlib  # <-")),
    ("dynamic-code", candidate("return __import__('torch').relu(launch(x))  # <-")),
    ("dynamic-code", candidate("return launch(x)", prelude="import pickle  # <-")),
    ("dynamic-code", candidate("return launch(x)", prelude="code = compile('1', 'f', 'eval')  # <-")),
    ("dynamic-code", candidate("return launch(x)", prelude="import typing\ndef f(t: \"__import__('os')\"):\n    pass\nHINTS = typing.get_type_hints(f)  # <-")),
    ("dynamic-code", candidate("return launch(x)", prelude="import functools\n@functools.singledispatch  # <-\ndef f(t):\n    pass")),
    ("dynamic-getattr", candidate("return getattr(torch, 'mat' + 'mul')(launch(x), x)  # <-")),
    ("dynamic-getattr", candidate("name = self.op\nreturn getattr(launch(x), name)()  # <-", init="self.op = 'relu'")),
    ("dynamic-getattr", candidate("return launch(x)", init="setattr(torch, 'all' + 'close', None)  # <-")),
    ("dunder-access", candidate("return launch(x)", init="self.k = ().__class__.__base__.__subclasses__()  # <-")),
    ("dunder-access", candidate("return launch(x)", init="self.g = launch.__globals__  # <-")),
    ("dunder-access", candidate("return launch(x)", init="self.b = __builtins__  # <-")),
    ("dunder-access", candidate("return launch(x)", init="self.d = torch.__dict__  # <-")),
    ("dunder-access", candidate("return launch(x)", init="self.c = launch.__code__  # <-")),
    ("dunder-access", candidate("return launch(x)", init="self.d = getattr(torch, '__dict__')  # <-")),
    ("dunder-access", candidate("return launch(x)", init="self.t = type(x).__mro__  # <-", prelude="x = 1")),
    ("dunder-access", candidate("return launch(x)", init="self.c = launch.__class__  # <-")),
    ("dunder-access", candidate("return launch(x)", init="self.k = __build_class__  # <-")),
    ("dunder-access", candidate("return launch(x)", prelude="try:\n    raise KeyError\nexcept KeyError as exc:\n    TB = exc.__traceback__  # <-")),
    ("private-attribute", candidate("return launch(x)", prelude="import warnings\nMAIN = warnings.catch_warnings()._module  # <-")),
    ("private-attribute", candidate("return launch(x)", init="self.p = self.fc._parameters  # <-\nself.fc = nn.Linear(4, 4)")),
    ("dynamic-code", candidate("return launch(x)", prelude="def f(t: eval('torch.Tensor')):  # <-\n    pass")),
    ("dynamic-code", candidate("return launch(x)", prelude="def f(t) -> exec('import os'):  # <-\n    pass")),
    ("dynamic-code", candidate("return launch(x)", prelude="X: eval('int') = 1  # <-")),
    ("dynamic-code", candidate("match x:\n    case _ if eval('1'):  # <-\n        pass\nreturn launch(x)")),
    ("frame-introspection", candidate("return launch(x)", prelude="def up(frame):\n    match frame:\n        case object(f_back=caller):  # <-\n            return caller")),
    ("frame-introspection", candidate("return launch(x)", prelude="import functools\ndef copy(holder, frame):\n    return functools.update_wrapper(holder, frame, assigned=('f_locals',))  # <-")),
    ("module-attribute", candidate("match x:\n    case torch.os.sep:  # <-\n        pass\nreturn launch(x)")),
    ("dynamic-getattr", candidate("return launch(x)", prelude="def up(frame):\n    return getattr(frame, 'f_' + 'back')  # <-")),
    ("dynamic-getattr", candidate("return launch(x)", init="self.g = getattr(launch, '__glob' + 'als__')  # <-")),
    ("dynamic-getattr", candidate("return launch(x)", init="self.c = getattr(getattr((), '__cla' + 'ss__'), 'mro')  # <-")),
    ("dynamic-getattr", candidate("name = 'weight'\nreturn launch(getattr(self, name))  # <-")),
    ("dynamic-getattr", candidate("return launch(x)", init="self.h = hasattr(launch, 'x' + 'y')  # <-")),
    ("dynamic-getattr", candidate("return launch(x)", init="name = 'k'\nself.v = self.__dict__[name]  # <-")),
    ("dynamic-getattr", candidate("return launch(x)", init="name = 'k'\nself.v = self.__dict__.get(name)  # <-")),
    ("dynamic-getattr", candidate("return launch(x)", init="name = 'k'\nself.v = self.__getattribute__(name)  # <-")),
    ("dynamic-getattr", candidate("return launch(x)", init="self.s = '{0.__globals__}'.format(launch)  # <-")),
    ("dynamic-getattr", candidate("return launch(x)", init="self.s = '{0:{1.__class__}}'.format(1, launch)  # <-")),
    ("dynamic-getattr", candidate("return launch(x)", init="self.s = '{f[__builtins__]}'.format_map({'f': {}})  # <-")),
    ("dynamic-getattr", candidate("return launch(x)", init="t = '{0.' + 'f_back}'\nself.s = t.format(launch)  # <-")),
    ("dynamic-getattr", candidate("return launch(x)", init="self.s = str.format('{0.__code__}', launch)  # <-")),
    ("dynamic-getattr", candidate("return launch(x)", init="show = '{0.f_back}'.format  # <-\nself.s = show(launch)")),
    ("dynamic-getattr", candidate("return launch(x)", init="self.s = list(map('{0.f_locals}'.format, [launch]))  # <-")),
    ("dynamic-getattr", candidate("return launch(x)", init="self.s = getattr('{0.f_back}', 'format')(launch)  # <-")),
    ("dynamic-getattr", candidate("return launch(x)", init="show = str.format  # <-\nself.s = show('{0.f_back}', launch)")),
    ("dynamic-getattr", candidate("return launch(x)", prelude="import operator\nREAD = operator.attrgetter('f_back')  # <-")),
    ("dynamic-getattr", candidate("return launch(x)", prelude="import functools\nREAD = functools.partial(getattr, launch)  # <-")),
    ("dynamic-getattr", candidate("return launch(x)", prelude="import functools\nUP = functools.reduce(getattr, NAMES, None)  # <-\nNAMES = []")),
    ("frame-introspection", candidate("import sys\nf = sys._getframe(1)  # <-\nreturn launch(x)")),
    ("frame-introspection", candidate("import inspect  # <-\nreturn launch(x)")),
    ("frame-introspection", candidate("return launch(x)", prelude="import gc  # <-")),
    ("frame-introspection", candidate("return launch(x)", prelude="import sys\nMODS = sys.modules  # <-")),
    ("frame-introspection", candidate("return launch(x)", init="self.g = globals()  # <-")),
    ("frame-introspection", candidate("return launch(x)", init="self.v = vars(torch)  # <-")),
    ("frame-introspection", candidate("def gen():\n    yield 1\ng = gen()\nframe = g.gi_frame  # <-\nreturn launch(x)")),
    ("frame-introspection", candidate("return launch(x)", prelude="def up(frame):\n    return frame.f_back.f_locals  # <-")),
    ("frame-introspection", candidate("return launch(x)", prelude="def read(cell):\n    return cell.cell_contents  # <-")),
    ("frame-introspection", candidate("return launch(x)", init="self.names = dir(launch)  # <-")),
    ("os-escape", candidate("return launch(x)", prelude="import subprocess  # <-")),
    ("os-escape", candidate("return launch(x)", prelude="import os\nos.system('true')  # <-")),
    ("os-escape", candidate("return launch(x)", prelude="from os import popen  # <-")),
    ("os-escape", candidate("return launch(x)", prelude="import ctypes  # <-")),
    ("os-escape", candidate("return launch(x)", prelude="import socket  # <-")),
    ("os-escape", candidate("return launch(x)", prelude="import signal  # <-")),
    ("os-escape", candidate("import sys\nsys.exit(0)  # <-\nreturn launch(x)")),
    ("os-escape", candidate("return launch(x)", prelude="import os\nos.kill(os.getpid(), 9)  # <-")),
    ("os-escape", candidate("p = torch.cuda.caching_allocator_alloc(1024)  # <-\nreturn launch(x)")),
    ("file-io", candidate("return launch(x)", init="self.t = open('/tmp/ref.pt', 'rb').read()  # <-")),
    ("file-io", candidate("torch.save(x, '/tmp/x.pt')  # <-\nreturn launch(x)")),
    ("file-io", candidate("return torch.load('/tmp/out.pt')  # <-")),
    ("file-io", candidate("return launch(x)", prelude="import shutil  # <-")),
    ("file-io", candidate("import codecs\ncodecs.open('/tmp/ref.txt')  # <-\nreturn launch(x)")),
    ("file-io", candidate("return launch(x)", prelude="from pathlib import Path  # <-")),
    ("file-io", candidate("return launch(x)", prelude="import os\nFILES = os.listdir('.')  # <-")),
    ("python-in-kernel", candidate("return launch(x)", prelude="@triton.jit\ndef bad(p):\n    torch.relu(p)  # <-")),
    ("python-in-kernel", candidate("return launch(x)", prelude="def py():\n    return 0\n\n@triton.jit\ndef bad(p):\n    py()  # <-")),
]

# Honest glue: nothing is reported under either policy.
CLEAN = {
    "comments, docstrings and strings": candidate(
        '''
        """Replaces torch.matmul(x, y) and F.relu; never calls torch.softmax."""
        # torch.matmul(x, x) would be the reference; nn.Linear is not used
        message = "torch.relu(x) + exec('x') + os.system"
        return launch(x)
        '''
    ),
    "names like ops": candidate(
        """
        matmul = launch
        conv2d_out = matmul(x)
        torch_relu = conv2d_out
        return torch_relu
        """,
        prelude="def softmax(t):\n    return launch(t)\n\ndef conv(t):\n    return softmax(t)",
    ),
    "shape arithmetic": candidate(
        """
        n = x.numel()
        rows = x.shape[0] * 2
        blocks = (n + 256 - 1) // 256
        grid = (triton.cdiv(n, 256), max(1, rows // 2), -x.shape[-1], min(n, 1024))
        scale = 1.0 / math.sqrt(x.size(-1))
        half = x.size(1) // 2
        assert x.dim() == 2 and x.shape[1] % 2 == 0 and x.is_contiguous() and blocks > 0
        if x.dtype == torch.float16 or x.device.type == "cpu" or x.is_cuda:
            pass
        eps = torch.finfo(x.dtype).eps * 2
        return launch(x)
        """,
        prelude="import math",
    ),
    "allocation, views and layout": candidate(
        """
        y = x.contiguous().view(-1).reshape(x.shape).permute(1, 0).transpose(0, 1).t().T
        z = torch.empty((x.shape[0], x.shape[1]), device=x.device, dtype=torch.float32)
        w = torch.zeros_like(x).unsqueeze(0).squeeze(0).expand(x.shape).flatten()
        parts = torch.cat([launch(y), z.new_empty(0).view(0, x.shape[1])], dim=0)
        out = parts[: x.shape[0]].contiguous().to(x.device).float()
        out = F.pad(out, (0, 0))
        stride_m, stride_n = out.stride()
        out.fill_(0)
        out.copy_(launch(y))
        return out.view_as(x)
        """
    ),
    "parameters built in __init__": candidate(
        """
        w = self.fc.weight
        b = self.bias if self.bias is not None else None
        assert w.shape[1] == x.shape[1] and self.fc.in_features == x.shape[1] and b is not None
        return launch(x)
        """,
        init="""
        self.fc = nn.Linear(4, 4)
        self.bias = nn.Parameter(torch.randn(4) * 0.1)
        nn.init.kaiming_uniform_(self.fc.weight, a=math.sqrt(5))
        bound = 1 / math.sqrt(4)
        nn.init.uniform_(self.bias, -bound, bound)
        self.w_t = self.fc.weight.t().contiguous() * 1.0
        with torch.no_grad():
            self.norm = self.fc.weight.norm()
        """,
        prelude="import math",
    ),
    "kernels through self, dicts, wrappers and autotune": candidate(
        """
        out = torch.empty_like(x)
        self.kernel[(1,)](x, out, x.numel(), BLOCK=256)
        KERNELS["copy"][(1,)](x, out, x.numel(), BLOCK=256)
        tuned[lambda meta: (triton.cdiv(x.numel(), meta["BLOCK"]),)](x, out, x.numel())
        return wrapper(out)
        """,
        init="self.kernel = copy_kernel",
        prelude='''
        KERNELS = {"copy": copy_kernel}

        @triton.autotune(configs=[triton.Config({"BLOCK": 128})], key=["n"])
        @triton.jit
        def tuned(src, dst, n, BLOCK: tl.constexpr):
            copy_kernel(src, dst, n, BLOCK)

        @triton.heuristics({"EVEN": lambda args: args["n"] % 2 == 0})
        @triton.jit
        def _helper_kernel(src, n, EVEN: tl.constexpr):
            pass

        def wrapper(t):
            return launch(t)
        ''',
    ),
    "a kernel launched through a local module and a ModuleList": candidate(
        """
        for block in self.blocks:
            x = block(x)
        return self.head(x)
        """,
        init="self.blocks = nn.ModuleList([Block() for _ in range(2)])\nself.head = Block()",
        prelude="class Block(nn.Module):\n    def forward(self, t):\n        return launch(t)",
    ),
    "an abstract base class": HEADER + '''
class Base(nn.Module):
    def forward(self, x):
        raise NotImplementedError("subclasses launch their kernel")


class ModelNew(Base):
    def forward(self, x):
        return launch(x)
''',
    "a Triton base class and super().__init__": HEADER + '''
class Base(nn.Module):
    def __init__(self, scale):
        super().__init__()
        self.scale = scale

    def forward(self, x):
        return launch(x)


class ModelNew(Base):
    def __init__(self):
        super(ModelNew, self).__init__(2.0)
''',
    "try/except outside forward, or re-raising": candidate(
        """
        try:
            return launch(x)
        except RuntimeError as exc:
            raise RuntimeError(f"kernel failed on shape {tuple(x.shape)}") from exc
        """,
        prelude="try:\n    import math\nexcept ImportError:\n    math = None",
    ),
    "config caches keyed by shape, alignment checks": candidate(
        """
        key = (tuple(x.shape), x.dtype)
        if key not in self.configs:
            self.configs[key] = {"BLOCK": 256}
        assert x.data_ptr() % 16 == 0
        return launch(x)
        """,
        init="self.configs = {}",
        prelude="import functools\n\n@functools.lru_cache(maxsize=None)\ndef block_for(n):\n    return 256 if n > 1024 else 128",
    ),
    "harmless stdlib": candidate(
        """
        if os.environ.get("TRITON_INTERPRET") == "1" and os.path.exists("."):
            pass
        if x.numel() == 0:
            warnings.warn(f"empty input {x.shape}")
        print(f"shape={tuple(x.shape)}")
        return launch(x)
        """,
        prelude="import os\nimport sys\nimport warnings\nimport typing\nimport dataclasses\nimport itertools\nimport time\nfrom typing import Optional\nVERSION = sys.version_info",
    ),
    "allowed modules, literal attribute names and plain format strings": "from __future__ import annotations\n" + candidate(
        """
        w = getattr(self, "weight")
        if not hasattr(self, "bias"):
            pass
        label = "{}x{} {:>{}}".format(x.shape[0], x.shape[-1], self.__class__.__name__, 8) + "{n}".format(n=1)
        props = triton.runtime.driver.active.utils.get_device_properties(0) if torch.cuda.is_available() else {}
        assert label and w is not None and torch.__version__ and Tuple and props is not None
        return launch(x)
        """,
        init="self.weight = nn.Parameter(torch.randn(4))",
        prelude="""
        import math
        from dataclasses import dataclass
        from typing import Optional, Tuple
        from triton.language.extra import libdevice
        from triton.language.extra.cuda import libdevice as cuda_libdevice
        import torch.nn.init as init
        """,
    ),
    "annotations, match statements and own private attributes": candidate(
        """
        match x.dim():
            case 1 | 2:
                n: int = x.numel()
            case _ if self._block > 0:
                n = x.numel()
        config = Config(self._block)
        assert config._block == self._block and n > 0
        return launch(x)
        """,
        init="self._block = 256",
        prelude="""
        from typing import Optional

        class Config:
            def __init__(self, block: int) -> None:
                self._block = block

        def helper(t: torch.Tensor, out: Optional[torch.Tensor] = None) -> torch.Tensor:
            return launch(t)
        """,
    ),
    "a self-test under __main__": candidate("return launch(x)") + '''

if __name__ == "__main__":
    import subprocess
    torch.manual_seed(0)
    x = torch.randn(4)
    assert torch.allclose(ModelNew()(x), torch.relu(x) @ x)
''',
    "scalar forward arguments": candidate(
        "return launch(x) if dim * 2 > 0 and -alpha < 1 else launch(x)",
        params="x, dim: int = 1, alpha=0.5",
    ),
    "decorators, properties and harmless torch.jit queries": candidate(
        """
        if torch.jit.is_scripting() or self.block < 0:
            return x
        return launch(x)
        """,
        decorator="@logged",
        members="@property\ndef block(self):\n    return 256",
        prelude="""
        import functools

        def logged(fn):
            @functools.wraps(fn)
            def inner(self, *args, **kwargs):
                return fn(self, *args, **kwargs)
            return inner
        """,
    ).replace("    @logged\n", "    @torch.no_grad()\n    @logged\n"),
    "torch.library's Triton launchers": candidate(
        "return add_one(x)",
        prelude="""
        @torch.library.triton_op("corpus::add_one", mutates_args=())
        def add_one(t: torch.Tensor) -> torch.Tensor:
            out = torch.empty_like(t)
            torch.library.wrap_triton(copy_kernel)[(triton.cdiv(t.numel(), 256),)](t, out, t.numel(), BLOCK=256)
            return out
        """,
    ),
    "an autograd.Function and a nested grid function": candidate(
        """
        def grid(meta):
            return (triton.cdiv(x.numel(), meta["BLOCK"]),)
        return Fn.apply(x)
        """,
        prelude="class Fn(torch.autograd.Function):\n    @staticmethod\n    def forward(ctx, t):\n        return launch(t)\n\n    @staticmethod\n    def backward(ctx, g):\n        return g",
    ),
}


def test_rules_registry_is_stable_and_documented():
    assert all(re.fullmatch(r"[a-z]+(-[a-z0-9]+)*", rule) for rule in RULES)
    assert all(info.id == rule and info.summary for rule, info in RULES.items())
    docs = (REPO / "docs" / "verifier_rules.md").read_text()
    static_section = docs.split("\n## Rules\n", 1)[1].split("\n## ", 1)[0]
    documented = set(re.findall(r"^\| `([a-z0-9-]+)` \|", static_section, re.M))
    assert documented == set(RULES)


def test_every_rule_has_a_triggering_snippet():
    covered = {rule for rule, _ in TRIGGERS} | {"unanalysable"}
    assert covered == set(RULES)


@pytest.mark.parametrize("rule, code", TRIGGERS, ids=[f"{r}-{i}" for i, (r, _) in enumerate(TRIGGERS)])
def test_rule_triggers_on_its_line(rule, code):
    compile(code, "<candidate>", "exec")  # every snippet is valid Python
    lines = found(code)
    assert rule in lines, f"{rule} not reported; got {lines}"
    expected = marked_line(code)
    if expected is not None:
        assert expected in lines[rule], f"{rule} reported on {lines[rule]}, expected line {expected}"
    relaxed = found(code, Policy.RELAXED)
    assert (rule in relaxed) == (not RULES[rule].strict_only)


@pytest.mark.parametrize("code", CLEAN.values(), ids=list(CLEAN))
def test_honest_glue_is_clean_under_both_policies(code):
    compile(code, "<candidate>", "exec")
    assert found(code) == {}
    assert found(code, Policy.RELAXED) == {}


def test_no_kernel_launch_is_reported_on_forward():
    code = candidate("return x.clone()")
    assert found(code)["no-kernel-launch"] == [code.splitlines().index("    def forward(self, x):") + 1]
    # A kernel launched only from a helper that forward never calls does not count.
    assert "no-kernel-launch" in found(candidate("return x.clone()", prelude="def unused(t):\n    return launch(t)"))
    # A kernel passed to an unknown launcher might be launched: the runtime layer decides.
    assert "no-kernel-launch" not in found(candidate("return runner(copy_kernel, x)", prelude="from triton.testing import do_bench as runner"))


def test_reference_copy_held_as_attribute_is_followed():
    code = candidate("launch(x)\nreturn self.ref(x)", prelude="class Model(nn.Module):\n    def forward(self, x):\n        return x @ x", init="self.ref = Model()")
    assert "tensor-operator" in found(code)


def test_relaxed_policy_keeps_only_non_glue_rules():
    code = candidate("try:\n    y = launch(x)\nexcept Exception:\n    y = x\nreturn torch.relu(y) + F.gelu(y).sum()", prelude="torch.allclose = None")
    assert set(found(code)) == {"exception-fallback", "monkeypatch", "torch-compute-call", "torch-functional-call", "tensor-operator", "tensor-method-call"}
    assert set(found(code, Policy.RELAXED)) == {"exception-fallback", "monkeypatch"}
    assert check_static(code, "relaxed") == check_static(code, Policy.RELAXED)


def test_violations_are_sorted_and_carry_lines():
    code = candidate("y = launch(x) + x\nreturn torch.tanh(y)", prelude="import gc")
    violations = check_static(code)
    assert [v.line for v in violations] == sorted(v.line for v in violations)
    assert all(isinstance(v.line, int) and v.line > 0 and v.message for v in violations)


@pytest.mark.parametrize(
    "code",
    [
        "",
        "def broken(:\n",
        "x = 1\x00",
        "ModelNew = 3",
        "class ModelNew:\n    forward = None\n",
        "class ModelNew:\n    pass\n",
        "import torch\nclass ModelNew(torch.nn.Module):\n    async def forward(self, x):\n        return await x\n",
        "def f(*a, **k):\n    return f(*a, **k)\nclass ModelNew:\n    def forward(self, x):\n        return f(x, y=x)\n",
        "class ModelNew:\n    def forward(self, x):\n        match x:\n            case [a, *rest]:\n                return a\n            case _:\n                return (y := x)\n",
        "class ModelNew:\n    def forward(self, x):\n        global G\n        G = {k: v for k, v in x}\n        return [i async for i in x]\n",
        "class A(B):\n    class C(A):\n        pass\nclass ModelNew(A.C):\n    def forward(self, *args, **kwargs):\n        return super().forward(*args, **kwargs)\n",
    ],
)
def test_odd_input_never_crashes(code):
    result = check_static(code)
    assert all(v.rule in RULES and v.rule != "unanalysable" for v in result)


def test_syntax_errors_are_left_to_the_format_layer():
    assert check_static("def broken(:") == []
    assert check_static("x = 1\x00") == []


def chain(depth: int, last: str) -> str:
    """forward -> f0 -> f1 -> ... -> f{depth}, whose body is `last`."""
    helpers = "\n".join(f"def f{i}(x):\n    return f{i + 1}(x)" for i in range(depth))
    return candidate("return f0(launch(x))", prelude=f"{helpers}\ndef f{depth}(x):\n    {last}")


def test_deep_call_chains_are_followed_or_reported_unanalysable():
    assert set(found(chain(40, "return torch.relu(x)"))) == {"torch-compute-call"}
    # Hiding the work deeper than the analysis can follow is not a way through: nothing is certified.
    assert [(v.rule, v.line) for v in check_static(chain(3000, "return x"))] == [("unanalysable", 0)]
    assert [v.rule for v in check_static(chain(3000, "return x"), Policy.RELAXED)] == ["unanalysable"]
    # Nesting beyond the parser's limits is a syntax error: the format layer's to report.
    assert check_static("x = " + "(" * 5000 + "1" + ")" * 5000) == []


def test_kernelbench_references_parse_without_internal_errors(kernelbench_rows):
    """Every KernelBench reference, and the same code renamed to ModelNew, is analysed to the end."""
    for row in kernelbench_rows:
        code = row["code"]
        assert "unanalysable" not in found(code), row["name"]
        as_candidate = code.replace("class Model(", "class ModelNew(").replace("super(Model,", "super(ModelNew,")
        rules = found(as_candidate)
        assert "unanalysable" not in rules, row["name"]
        # A reference computes in PyTorch and launches nothing: the strict policy must say so.
        assert "no-kernel-launch" in rules, row["name"]
        if "transformers" not in code:
            assert any(RULES[r].strict_only for r in rules), row["name"]


# --- the corpus -----------------------------------------------------------------------------------------
def _entries(status: str | None = None) -> list[dict]:
    return [e for e in MANIFEST if status is None or e["expected_status"] == status]


@pytest.mark.parametrize("entry", MANIFEST, ids=[e["file"] for e in MANIFEST])
def test_corpus_static_verdicts_match_the_manifest(entry):
    code = (CORPUS / entry["file"]).read_text()
    strict = {v.rule for v in check_static(code, Policy.STRICT)}
    relaxed = {v.rule for v in check_static(code, Policy.RELAXED)}
    assert strict == set(entry["static_rules"])
    assert relaxed == set(entry["static_rules_relaxed"])
    assert bool(strict) == (entry["expected_layer"] == "static")


def test_corpus_manifest_is_well_formed():
    categories = {e["category"] for e in _entries("cheat") + _entries("incorrect")}
    assert len(_entries("ok")) >= 10
    assert len([e for e in MANIFEST if e["expected_status"] != "ok"]) >= 30
    assert len({e["file"] for e in MANIFEST}) == len(MANIFEST)
    assert {
        "torch-delegation", "partial-delegation", "exception-fallback", "reference-copy", "uninitialised-output",
        "constant-output", "input-mutation", "timing-evasion", "lazy-tensor", "monkeypatch", "result-cache",
        "precision-downgrade", "hardcoded-shapes", "compiler-delegation", "dynamic-code", "alias-evasion",
        "sandbox-escape", "input-prediction", "forward-hijack",
    } <= categories
    for entry in MANIFEST:
        assert entry["expected_status"] in ("ok", "cheat", "incorrect")
        assert (entry["expected_layer"] is None) == (entry["expected_status"] == "ok")
        assert entry["expected_layer"] in (None, "static", "runtime", "correctness")
        assert set(entry["static_rules_relaxed"]) <= set(entry["static_rules"]) <= set(RULES)
        assert (entry["category"] == "honest") == (entry["expected_status"] == "ok")
        assert (CORPUS / entry["problem"]).is_file() and entry["description"]
        tree = ast.parse((CORPUS / entry["file"]).read_text())
        assert any(isinstance(n, ast.ClassDef) and n.name == "ModelNew" for n in tree.body), entry["file"]
        assert any(isinstance(n, ast.FunctionDef) and any("triton" in ast.unparse(d) for d in n.decorator_list)
                   for n in tree.body), entry["file"]
    listed = {e["file"] for e in MANIFEST}
    on_disk = {f"{p.parent.name}/{p.name}" for folder in ("hacks", "honest") for p in (CORPUS / folder).glob("*.py")}
    assert listed == on_disk


def test_casts_to_the_references_own_low_precision_are_allowed():
    cast = '''
import torch, triton, triton.language as tl

@triton.jit
def k(x_ptr):
    pass

class ModelNew(torch.nn.Module):
    def forward(self, x):
        y = x.half()
        k[(1,)](y)
        return y
'''
    fp32_reference = "import torch\ndef get_inputs():\n    return [torch.randn(4)]\n"
    fp16_reference = "import torch\ndef get_inputs():\n    return [torch.randn(4, dtype=torch.float16)]\n"
    assert "precision-downgrade" in {v.rule for v in check_static(cast, Policy.STRICT, fp32_reference)}
    assert "precision-downgrade" in {v.rule for v in check_static(cast)}
    assert "precision-downgrade" not in {v.rule for v in check_static(cast, Policy.STRICT, fp16_reference)}
    flags = cast.replace("y = x.half()", "torch.backends.cuda.matmul.allow_tf32 = True\n        y = x")
    assert "precision-downgrade" in {v.rule for v in check_static(flags, Policy.STRICT, fp16_reference)}
