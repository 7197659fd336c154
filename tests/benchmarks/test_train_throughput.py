"""The training-throughput benchmark: its flop count, and a CPU smoke run of both sides (--tiny)."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from benchmark_scripts import load_benchmark

REPO_ROOT = Path(__file__).resolve().parents[2]
SCRIPT = REPO_ROOT / "benchmarks" / "train_throughput.py"


def _load_benchmark():
    return load_benchmark("train_throughput")


def test_flops_per_token_of_the_8b_shape():
    """6 N + 12 L A S with N = every layer weight + the LM head (the untied input table is only gathered)."""
    bench = _load_benchmark()
    args = bench.build_parser().parse_args([])
    config = bench.model_config("8b", args)
    d, v, layers, f = 4096, 151936, 36, 12288
    per_layer = d * 128 * (32 + 2 * 8) + 32 * 128 * d + 3 * d * f + 2 * d + 2 * 128
    n = layers * per_layer + d + d * v  # final norm and the LM head; no input embedding table
    flops = bench.flops_per_token(config, 4096)
    assert flops["matmul_params"] == n
    assert flops["flops_per_token"] == 6 * n + 12 * layers * 32 * 128 * 4096
    result = {"tokens_per_s": 1000.0}
    bench.add_mfu(result, config, 4096, matmul_rate=1e15, devices=2)
    assert result["mfu"] == pytest.approx(flops["flops_per_token"] * 1000.0 / 2e15)


@pytest.mark.slow
def test_tiny_run_prints_the_table_and_writes_every_number(tmp_path):
    out = tmp_path / "train.json"
    # Eight CPU devices: the JAX step runs on an fsdp mesh, rows split over the devices.
    env = {**os.environ, "JAX_PLATFORMS": "cpu", "HF_HUB_OFFLINE": "1",
           "XLA_FLAGS": "--xla_force_host_platform_device_count=8"}
    done = subprocess.run([sys.executable, str(SCRIPT), "--tiny", "--out", str(out)], capture_output=True, text=True,
                          timeout=170, env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "model side" in done.stdout and "jax / torch tokens/s" in done.stdout
    entry = json.loads(out.read_text())["models"]["tiny"]
    jax_side, torch_side = entry["jax"], entry["torch"]
    for side in (jax_side, torch_side):
        assert side["tokens_per_s"] == pytest.approx(8 * 64 / side["step_s"])
        assert 0 < side["mfu_6n"] < side["mfu"]
        # Random weights (std 0.02) predict nearly uniformly over the 128 ids: both losses are ln(128).
        assert side["losses"][0] == pytest.approx(math.log(128), abs=0.05)
        assert len(side["step_s_all"]) == 2
    assert jax_side["devices"] == 8 and jax_side["remat"] == "full" and jax_side["param_dtype"] == "float32"
    assert entry["speedup_tokens_per_s"] == pytest.approx(jax_side["tokens_per_s"] / torch_side["tokens_per_s"])
