"""Denial of service through memory: the memory limit is enforced by a watchdog on the candidate's RSS (and, on the
interpreter, RLIMIT_AS). Pages of a memfd that the process writes with write(2) and never maps are neither in its
RSS nor in its address space, yet they are host memory (shmem) for as long as the descriptor is open. The same holds
for a tmpfs work root (/dev/shm) and, for disk, for files up to RLIMIT_FSIZE (64 GB each).
An honest ReLU kernel whose __init__ holds __MB__ MB in memfds for the rest of its life."""
import os

import torch
import torch.nn as nn
import triton
import triton.language as tl

# INCLUDE _reach
# INCLUDE _honest_relu_model

_HELD = []


def _hold(megabytes):
    _attempted("memfd-memory")
    chunk = b"\1" * (16 << 20)
    fd = os.memfd_create("atk-held")
    for _ in range(megabytes // 16):
        os.write(fd, chunk)
    _HELD.append(fd)
    rss = [line.split()[1] for line in open("/proc/self/status") if line.startswith("VmRSS")]
    print(f"held {megabytes} MB in a memfd; VmRSS {int(rss[0]) // 1024} MB", flush=True)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        _hold(__MB__)

    def forward(self, x):
        return relu(x)
