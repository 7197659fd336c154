"""Functions whose call by candidate code is itself a finding: they hide work from the op recorder.

- Dispatch guards switch torch's Python dispatch key off, pop the dispatch-mode stack or hand out the modes on
  it (whose `__exit__` pops the recorder); torch operators then run without any dispatch mode seeing them
  (rule `monitor-disabled`).
- Host reads hand a tensor's values to NumPy or plain Python (`.numpy()`, `.tolist()`, `__array__`,
  `__dlpack__`); compute done there issues no torch operator at all (rule `host-read-in-forward`).

Each function is replaced wherever torch's modules hold it, so an alias (`torch.utils._mode_utils.no_dispatch`
is `torch._C._DisableTorchDispatch`) leads to the wrapper too. Torch uses the same guards internally, Triton's
benchmarking reads timings with `.tolist()` and the monitor reads the mode stack: only calls whose immediate
caller is none of these count.
"""

from __future__ import annotations

import sys
from collections.abc import Callable

import torch

from sandbox_service.verifier.callers import is_trusted_file

MONITOR_DISABLED = "monitor-disabled"
HOST_READ = "host-read-in-forward"

DISPATCH_GUARDS_C = (
    "_DisableTorchDispatch", "_ExcludeDispatchKeyGuard", "ExcludeDispatchKeyGuard", "_SetExcludeDispatchKeyGuard",
    "_ForceDispatchKeyGuard", "_dispatch_tls_set_dispatch_key_excluded", "_pop_torch_dispatch_stack",
    "_set_dispatch_mode", "_unset_dispatch_mode", "_get_dispatch_mode", "_get_dispatch_stack_at",
)
DISPATCH_GUARDS_PY = (
    "_pop_mode", "_pop_mode_temporarily", "_disable_current_modes", "_get_current_dispatch_mode",
    "_get_current_dispatch_mode_stack",
)
HOST_READS = ("numpy", "tolist", "__array__", "__dlpack__")

# (rule, qualified name) -> None; the monitor decides whether a forward is in progress
OnCall = Callable[[str, str], None]


def _tripwire(original, rule: str, name: str, on_call: OnCall):
    def wrapper(*args, **kwargs):
        if not is_trusted_file(sys._getframe(1).f_code.co_filename):
            on_call(rule, name)
        return original(*args, **kwargs)

    wrapper.__name__ = getattr(original, "__name__", name)
    return wrapper


def _replace_everywhere(original, wrapper) -> None:
    for module_name, module in list(sys.modules.items()):
        if module_name != "torch" and not module_name.startswith("torch."):
            continue
        namespace = getattr(module, "__dict__", None) or {}
        for attribute, value in list(namespace.items()):
            if value is original:
                setattr(module, attribute, wrapper)


def install(on_call: OnCall) -> None:
    """Wrap the guards and host reads; call once, before any candidate code is imported."""
    from torch.utils import _python_dispatch

    guards = [(torch._C, name) for name in DISPATCH_GUARDS_C] + [(_python_dispatch, n) for n in DISPATCH_GUARDS_PY]
    for owner, name in guards:
        original = getattr(owner, name)
        _replace_everywhere(original, _tripwire(original, MONITOR_DISABLED, f"{owner.__name__}.{name}", on_call))
    for name in HOST_READS:
        original = getattr(torch.Tensor, name)
        setattr(torch.Tensor, name, _tripwire(original, HOST_READ, f"torch.Tensor.{name}", on_call))
