"""Denial of service through the work root: the server puts it on /dev/shm when there is room
(scheduler._memory_backed_dir), so the candidate's own folder is RAM. posix_fallocate reserves __MB__ MB there at
once; RLIMIT_FSIZE allows 64 GB per file, nothing bounds the number of files, and none of it is in the candidate's
RSS or address space, so the memory watchdog never sees it. A tmpfs full to its size (half the host's RAM by default)
also fails every other evaluation's hand-over on the lane while it lasts, and for good when the folder cannot be
removed (nests_its_folder_too_deep_to_remove). The ReLU itself is honest."""
import os

import torch
import torch.nn as nn
import triton
import triton.language as tl

# INCLUDE _reach
# INCLUDE _honest_relu_model


def _fill(megabytes):
    _attempted("fill-own-folder")
    fd = os.open("ballast", os.O_WRONLY | os.O_CREAT, 0o600)
    os.posix_fallocate(fd, 0, megabytes << 20)
    os.close(fd)
    print(f"reserved {megabytes} MB in {os.getcwd()}", flush=True)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        _fill(__MB__)

    def forward(self, x):
        return relu(x)
