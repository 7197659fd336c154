"""SFT on a GPU with the production numerics: bf16 compute over float32 master weights, cuDNN attention
over packed segments, full rematerialisation and chunked logits, on a Qwen3-0.6B-shaped random model.
Skipped without CUDA (run on the device machine:
`python -m pytest -q -s tests/jaxrl/training/test_sft_gpu.py`)."""

from __future__ import annotations

import os

import numpy as np
import pytest

from jaxrl.config import load_config
from jaxrl.cli import sft as sft_command
from jaxrl.training.metrics_log import read_metrics

pytestmark = pytest.mark.gpu


def test_sft_step_with_production_numerics_learns_on_gpu(tmp_path):
    import jax

    assert jax.default_backend() == "gpu", "JAX does not see the GPU (JAX_PLATFORMS=cpu set?)"
    overrides = {
        "model.source": "random:qwen3_0_6b",
        # The GPU image lacks the bundled-model package: point this at a saved copy of its tokenizer there.
        "model.tokenizer": os.environ.get("TRITONRL_TEST_TOKENIZER", "smollm2-135m"),
        "model.dtype": "bfloat16",
        "model.param_dtype": "float32",
        "model.attention_impl": "fast",
        "model.remat": "full",
        "mesh.fsdp": -1,
        "sft.data": "configs/data/tiny_kernelbook.jsonl",
        "sft.format": "kernelbook",
        "sft.epochs": 6,
        "sft.batch_size": 8,
        "sft.micro_batch_rows": jax.device_count(),
        "sft.max_seq_len": 4096,
        "sft.logits_chunk": 1024,
        "optim.learning_rate": 3e-4,
        "checkpoint.every": 0,
        "checkpoint.async_save": True,
        "checkpoint.export_dtype": "bfloat16",
        "run.output_root": str(tmp_path),
        "run.name": "gpu",
    }
    config = load_config("base", [f"{k}={v}" for k, v in overrides.items()])
    assert sft_command.run(config) == 0
    train = [r for r in read_metrics(tmp_path / "gpu") if "train/loss" in r]
    losses = [r["train/loss"] for r in train]
    print("\nloss per step:", [round(x, 3) for x in losses])
    print("tokens/s per step:", [round(r["train/tokens_per_s"]) for r in train])
    assert len(train) == 6 and all(np.isfinite(losses))
    assert losses[-1] < 0.8 * losses[0]
    exported = tmp_path / "gpu" / "hf"
    assert (exported / "model.safetensors").is_file() or (exported / "model.safetensors.index.json").is_file()
