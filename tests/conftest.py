"""Test-wide setup: CPU-only JAX with 8 fake devices, no hub or KernelBench download, `gpu` tests skipped
without CUDA, and tests that need the shared KernelBench copy skipped without it (failed in CI)."""

from __future__ import annotations

import atexit
import json
import os
import shutil
import tempfile
from pathlib import Path

# Must happen before anything imports jax: every JAX test sees 8 fake CPU devices (sharding tests use
# them all; unsharded arrays live on device 0).
os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")
os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# No test downloads KernelBench by accident (tests/jaxrl/data/test_kernelbench_source.py serves its own).
os.environ.setdefault("TRITONRL_NO_DOWNLOAD", "1")
# Compiling XLA programs is most of many JAX tests' time, and tests build the same tiny models again and
# again: a persistent compilation cache, fresh for each session (each xdist worker, each Bazel target)
# and shared with the processes the tests start, compiles each program once. Programs that compile in
# under half a second (the op-by-op ones of eager code) are not worth a disk write. A positive size
# limit turns on the cache's file lock, which those processes need to share it safely.
if "JAX_COMPILATION_CACHE_DIR" not in os.environ:
    _jax_cache = tempfile.mkdtemp(prefix="tritonrl-jax-cache-")
    atexit.register(shutil.rmtree, _jax_cache, ignore_errors=True)
    os.environ["JAX_COMPILATION_CACHE_DIR"] = _jax_cache
os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0.5")
os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES", "0")
os.environ.setdefault("JAX_COMPILATION_CACHE_MAX_SIZE", str(4 << 30))

import pytest
from kernelbench_data import shared_kernelbench


def _cuda_available() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()


def pytest_collection_modifyitems(config, items):
    if _cuda_available():
        return
    skip_gpu = pytest.mark.skip(reason="needs a CUDA GPU (run on the device machine)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip_gpu)


@pytest.fixture(scope="session")
def kernelbench_path() -> Path:
    """The shared KernelBench JSONL; tests that take it skip without it, or fail in CI (tests/kernelbench_data.py)."""
    return shared_kernelbench()


@pytest.fixture(scope="session")
def kernelbench_rows(kernelbench_path) -> list[dict]:
    with open(kernelbench_path) as f:
        return [json.loads(line) for line in f if line.strip()]
