"""How a CUDA process's host thread waits for the GPU: the scheduling flag of its primary context.

With the driver's default (`auto`: spin while the process has fewer contexts than the host has cores) every
synchronisation spins a core until the GPU answers, and on a GPU shared by many processes' contexts that wait
lasts as long as the other contexts' time slices. `blocking` puts the thread to sleep on an interrupt instead,
at the price of a wake-up (microseconds) after each synchronisation. TRITONRL_CUDA_SYNC picks one for every
CUDA child (the executor, the judges, the validator); the setting must reach the driver before the process's
context exists, so `set_policy` runs before torch touches CUDA.
"""

from __future__ import annotations

import ctypes
import os

SYNC_ENV = "TRITONRL_CUDA_SYNC"
# CUcontext scheduling flags (cuda.h: CU_CTX_SCHED_AUTO, _SPIN, _YIELD, _BLOCKING_SYNC)
POLICIES = {"auto": 0, "spin": 1, "yield": 2, "blocking": 4}
DEFAULT_POLICY = "auto"


def policy_from_env(environ: dict[str, str] | None = None) -> str:
    """The configured policy; a value that is not one of POLICIES is an error the operator must see."""
    value = (os.environ if environ is None else environ).get(SYNC_ENV, DEFAULT_POLICY).strip().lower()
    if value not in POLICIES:
        raise ValueError(f"{SYNC_ENV}={value!r}: expected one of {', '.join(POLICIES)}")
    return value


def set_policy(policy: str, device: int = 0) -> None:
    """Set the primary context's scheduling flag of `device` through the driver API (before it is created:
    torch and Triton both use the primary context). `auto` leaves the driver's default untouched."""
    flag = POLICIES[policy]
    if not flag:
        return
    cuda = ctypes.CDLL("libcuda.so.1")
    set_flags = getattr(cuda, "cuDevicePrimaryCtxSetFlags_v2", None) or cuda.cuDevicePrimaryCtxSetFlags
    handle = ctypes.c_int()
    _check("cuInit", cuda.cuInit(0), policy)
    _check("cuDeviceGet", cuda.cuDeviceGet(ctypes.byref(handle), device), policy)
    _check("cuDevicePrimaryCtxSetFlags", set_flags(handle, ctypes.c_uint(flag)), policy)


def _check(call: str, code: int, policy: str) -> None:
    if code != 0:
        raise RuntimeError(f"{call} failed with CUDA error {code} while setting the {policy!r} sync policy")
