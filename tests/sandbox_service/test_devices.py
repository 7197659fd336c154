"""What the sandbox asks the machine about its GPUs."""

from __future__ import annotations

import pytest
import torch

from sandbox_service.devices import device_memory_reader, reaches_pageable_host_memory


def test_without_a_gpu_the_driver_cannot_be_asked():
    if torch.cuda.is_available():
        pytest.skip("a GPU is here")
    assert reaches_pageable_host_memory(0) is None
    assert device_memory_reader(0) is None


@pytest.mark.gpu
def test_a_gpu_says_whether_its_kernels_reach_pageable_host_memory(capsys):
    answer = reaches_pageable_host_memory(torch.cuda.current_device())
    assert answer in (True, False)
    with capsys.disabled():
        print(f"\npageable host memory reachable from {torch.cuda.get_device_name()}: {answer}")


@pytest.mark.gpu
def test_a_gpu_s_free_memory_is_read_without_a_cuda_context_as_cuda_counts_it():
    import subprocess
    import sys
    from pathlib import Path

    # In a fresh process: NVML's reading leaves it without a CUDA context (torch's would make one).
    probe = ("import ctypes; from sandbox_service.devices import device_memory_reader; "
             "memory = device_memory_reader(0)(); context = ctypes.c_void_p(); "
             "assert ctypes.CDLL('libcuda.so.1').cuCtxGetCurrent(ctypes.byref(context)) == 0; "
             "assert context.value is None, 'a CUDA context was made'; print(memory.free, memory.total)")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120,
                          cwd=Path(__file__).resolve().parents[2])
    assert done.returncode == 0, done.stderr
    free, total = map(int, done.stdout.split())
    cuda_free, cuda_total = torch.cuda.mem_get_info(0)
    assert abs(total - cuda_total) < 0.02 * cuda_total  # NVML counts a little memory CUDA keeps for itself
    assert free <= total and abs(free - cuda_free) < 2 << 30  # this process's context, and others' meanwhile
