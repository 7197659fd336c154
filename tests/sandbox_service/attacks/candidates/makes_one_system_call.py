"""One escape attempt made through the C library (ctypes), past the tripwire, so that the kernel's side of the jail
(seccomp, Landlock) is what answers. __ATTEMPT__ is a statement run in __init__ with `libc` (ctypes, use_errno) and
`report(what, answer)` (prints `what answer errno` on stdout); the ReLU itself is honest."""
import ctypes
import os

import torch
import torch.nn as nn
import triton
import triton.language as tl

# INCLUDE _reach
# INCLUDE _honest_relu_model


def _attempt():
    _attempted("system-call")
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    work_root = os.path.dirname(os.getcwd())

    def report(what, answer):
        print(f"answer {what} {answer} errno {ctypes.get_errno()}", flush=True)

    __ATTEMPT__


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        _attempt()

    def forward(self, x):
        return relu(x)
