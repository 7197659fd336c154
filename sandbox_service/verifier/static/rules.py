"""The static layer's rules: stable ids, what each one catches, and under which policy it applies.

Ids are part of the sandbox's contract (they reach trainers and dashboards in `Violation.rule`):
never rename one; add new ids instead.
"""

from __future__ import annotations

import dataclasses

from sandbox_service.options import Policy


@dataclasses.dataclass(frozen=True)
class RuleInfo:
    id: str
    summary: str
    # True: only the strict policy enforces it (torch compute in forward); the relaxed policy allows glue.
    strict_only: bool = False


_RULES = [
    # --- PyTorch doing the work (strict policy only) --------------------------------------------------
    RuleInfo("torch-compute-call", "a torch compute function (torch.matmul, torch.softmax, torch.linalg.*, ...) runs on the forward path", True),
    RuleInfo("torch-functional-call", "a torch.nn.functional function (F.relu, F.conv2d, ...) runs on the forward path", True),
    RuleInfo("torch-ops-call", "an operator is called through torch.ops.* on the forward path", True),
    RuleInfo("nn-layer-call", "a torch.nn compute layer (nn.Linear, nn.Conv2d, nn.Sequential, ...) is called or built on the forward path", True),
    RuleInfo("tensor-method-call", "a compute method is called on a tensor on the forward path (x.sum(), x.exp(), x.matmul(y), x.numpy(), ...)", True),
    RuleInfo("tensor-operator", "a Python operator computes on tensors on the forward path (a @ b, x + y, -x, x > 0, sum(xs), advanced indexing, ...)", True),
    RuleInfo("foreign-compute-call", "NumPy or einops computes on tensors on the forward path", True),
    # --- Delegation and fallbacks -------------------------------------------------------------------------
    RuleInfo("no-kernel-launch", "the forward path never launches a Triton kernel"),
    RuleInfo("reference-delegation", "ModelNew inherits a PyTorch-computing forward (a reference-style Model, a torch.nn layer, an imported class) or calls super().forward"),
    RuleInfo("forward-rebinding", "ModelNew's forward is replaced at run time or wrapped by forward hooks"),
    RuleInfo("exception-fallback", "try/except (or contextlib.suppress) on the forward path: a failing kernel can fall back silently"),
    RuleInfo("torch-compiler", "torch.compile, Inductor/Dynamo, extern_kernels, TorchScript, torch.fx/export, torch.library or cpp_extension is used"),
    RuleInfo("torch-private-api", "a private torch module or attribute (torch._C, torch._ops, ...) is used"),
    RuleInfo("foreign-import", "a module outside the allow-list is imported (the evaluator, the reference module, another kernel library, logging, numpy, a relative import)"),
    RuleInfo("module-attribute", "an attribute of an allowed module outside its allow-list: a module reached through another (torch.os, typing.sys, F.np) or a namespace honest kernels never need (torch.utils, triton.knobs)"),
    # --- Tampering with the evaluation --------------------------------------------------------------------
    RuleInfo("monkeypatch", "an attribute of an imported module or class (torch, triton, time, builtins, the evaluator, os.environ) is assigned, deleted or set"),
    RuleInfo("tensor-subclass", "a torch.Tensor subclass, __torch_function__/__torch_dispatch__ or a __class__ swap (lazy tensors that compute inside the comparison)"),
    RuleInfo("identity-cache", "results cached by input identity or contents: id(), data_ptr(), hash() or `is` against stored state, tensors as dict keys, torch.equal with stored inputs, lru_cache on tensors, weakref"),
    RuleInfo("input-mutation", "forward writes into its input tensors (in-place methods, item assignment, out= arguments)"),
    RuleInfo("precision-downgrade", "tensors cast to 16/8-bit floats, autocast, or global precision flags (allow_tf32, set_float32_matmul_precision, set_default_dtype)"),
    RuleInfo("side-stream", "CUDA streams are created or switched (torch.cuda.Stream, torch.cuda.stream, wait_stream, record_stream): work hidden from the timer"),
    RuleInfo("concurrency", "threads, processes or async tasks (threading, multiprocessing, concurrent.futures, asyncio)"),
    RuleInfo("rng-manipulation", "forward or __init__ reseeds or reads random-number state (manual_seed, set_rng_state, Generator), e.g. to predict inputs"),
    RuleInfo("precomputed-output", "the candidate generates the evaluation's inputs itself (get_inputs/get_init_inputs) to precompute outputs"),
    # --- Sandbox escapes ----------------------------------------------------------------------------------
    RuleInfo("dynamic-code", "code built at run time: eval, exec, compile, __import__, importlib, pickle/marshal, types.FunctionType/CodeType, string annotations evaluated by typing.get_type_hints/functools.singledispatch"),
    RuleInfo("dynamic-getattr", "an attribute named at run time, on any object: getattr/setattr/delattr/hasattr or __getattribute__ with a computed name, __dict__[name], operator.attrgetter/methodcaller, str.format fields that read attributes"),
    RuleInfo("dunder-access", "a dunder outside the allow-list (__globals__, __subclasses__, __builtins__, __code__, __closure__, __mro__, __traceback__, ...), or __dict__/__class__ of anything but self"),
    RuleInfo("private-attribute", "a private attribute (_name) of an object that is not the candidate's own: others' internals lead to modules and frames (warnings.catch_warnings()._module)"),
    RuleInfo("frame-introspection", "frames and the interpreter's state: gc, inspect, traceback, sys.modules, sys._getframe, globals(), vars(), dir(), f_back/f_locals/gi_frame/cell_contents, ..."),
    RuleInfo("os-escape", "processes, native code, network or signals: subprocess, os.system/exec/fork/kill, ctypes, cffi, socket, signal, atexit, sys.exit"),
    RuleInfo("file-io", "files and the file system: open, pathlib, shutil, tempfile, os.remove/listdir, torch.save/load, numpy.save/load"),
    RuleInfo("python-in-kernel", "a @triton.jit body uses torch or calls plain Python (it would run as Python under TRITON_INTERPRET=1)"),
    RuleInfo("unanalysable", "the source is too deeply nested or too large for the static analysis to finish"),
]

RULES: dict[str, RuleInfo] = {rule.id: rule for rule in _RULES}


def applies(rule_id: str, policy: Policy) -> bool:
    """Whether `rule_id` is enforced under `policy` (every rule under strict; the relaxed policy drops glue compute)."""
    return policy == Policy.STRICT or not RULES[rule_id].strict_only
