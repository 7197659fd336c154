"""What the sandbox asks the machine about its GPUs."""

from __future__ import annotations

import pytest
import torch

from sandbox_service.devices import reaches_pageable_host_memory


def test_without_a_gpu_the_driver_cannot_be_asked():
    if torch.cuda.is_available():
        pytest.skip("a GPU is here")
    assert reaches_pageable_host_memory(0) is None


@pytest.mark.gpu
def test_a_gpu_says_whether_its_kernels_reach_pageable_host_memory(capsys):
    answer = reaches_pageable_host_memory(torch.cuda.current_device())
    assert answer in (True, False)
    with capsys.disabled():
        print(f"\npageable host memory reachable from {torch.cuda.get_device_name()}: {answer}")
