"""benchmarks/sampler_throughput.py: the roofline arithmetic, and a --tiny run of every part on CPU."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from jaxrl.models import qwen3_0_6b, qwen3_8b

from benchmark_scripts import load_benchmark

REPO_ROOT = Path(__file__).resolve().parents[3]
SCRIPT = REPO_ROOT / "benchmarks" / "sampler_throughput.py"


@pytest.fixture(scope="module")
def bench():
    return load_benchmark("sampler_throughput")


def test_roofline_of_the_8b_shape(bench):
    config = qwen3_8b()
    # 36 layers x (k + v) x 8 kv heads x 128 dims x 2 bytes per token; 64 rows attend to 512 + 256 tokens on average
    kv = 64 * 768 * 36 * 2 * 8 * 128 * 2
    weights = 2 * (config.num_params() - 151936 * 4096)  # the untied embedding table is only gathered
    numbers = bench.roofline(config, 64, 512, 512, 4.25e12)
    assert numbers["mean_kv_bytes"] == kv and numbers["weight_bytes"] == weights
    assert numbers["roofline_tokens_per_s"] == pytest.approx(4.25e12 / (weights + kv) * 64)
    # ~12.1k tokens/s; counting the embedding table too gives the 11.5k
    assert 12_000 < numbers["roofline_tokens_per_s"] < 12_300
    assert 11_400 < 4.25e12 / (2 * config.num_params() + kv) * 64 < 11_600
    tied = qwen3_0_6b()  # a tied embedding is the LM head: read every step
    assert bench.weight_bytes_per_step(tied) == 2 * tied.num_params()


@pytest.mark.slow
def test_tiny_run_exercises_every_part(tmp_path):
    out = tmp_path / "result.json"
    env = {**os.environ, "JAX_PLATFORMS": "cpu", "HF_HUB_OFFLINE": "1"}
    env.pop("XLA_FLAGS", None)  # one CPU device, as on a plain machine
    done = subprocess.run([sys.executable, str(SCRIPT), "--tiny", "--out", str(out), "--scratch", str(tmp_path)],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    result = json.loads(out.read_text())
    jax_part, torch_part, load = result["models"]["tiny"]["jax"], result["models"]["tiny"]["torch"], result["load"]
    assert jax_part["decode_tokens_per_s"] > 0 and jax_part["copy_bandwidth_gbps"] > 0
    expected_fraction = jax_part["decode_tokens_per_s"] / jax_part["roofline_tokens_per_s"]
    assert jax_part["roofline_fraction"] == pytest.approx(expected_fraction)
    assert torch_part["e2e_tokens_per_s"] > 0 and torch_part["decode_tokens_per_s"] > 0
    assert load["bytes"] > 0 and load["load_s"] > 0
    assert not list(tmp_path.glob("sampler_bench_ckpt_*"))  # the checkpoint folder was removed
    table = done.stdout.splitlines()
    assert table[0].split()[:3] == ["model", "attn", "prefill"] and table[1].startswith("tiny")
