"""`jaxrl.cli.sft.run`: a config in, a run folder out (metrics, checkpoints, HF export), and
a killed run that, started again, ends exactly where the uninterrupted run ends."""

from __future__ import annotations

import json

import jax
import numpy as np
import pytest
from flax import nnx

from jaxrl import policy
from jaxrl.checkpoint import bundled_smollm2_path, load_hf_checkpoint, load_tokenizer
from jaxrl.config import load_config
from jaxrl.config.schema import ConfigError
from jaxrl.data.prompts import build_messages
from jaxrl.data.sft_data import read_kernelbook
from jaxrl.cli import sft as sft_command
from jaxrl.training.metrics_log import MetricsLogger, read_metrics
from jaxrl.training.packing import tokenize_example
from sandbox_service.verifier.extraction import extract_completion


@pytest.fixture(scope="module")
def tokenizer_dir(tmp_path_factory):
    """The bundled SmolLM2 tokenizer saved as a HF folder (reading the GGUF takes seconds; this does not)."""
    folder = tmp_path_factory.mktemp("tokenizer")
    load_tokenizer(bundled_smollm2_path()).save_pretrained(str(folder))
    return folder


@pytest.fixture(scope="module")
def chat_data(tmp_path_factory):
    path = tmp_path_factory.mktemp("data") / "train.jsonl"
    rows = [
        {"messages": [{"role": "user", "content": f"Double {i}."}, {"role": "assistant", "content": f"{2 * i}"}]}
        for i in range(6)
    ] + [{"prompt": "Say hi: ", "completion": "hi"}, {"prompt": "Say bye: ", "completion": "bye"}]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def make_config(tmp_path, tokenizer_dir, chat_data, name="run", **extra):
    overrides = {
        "model.source": "random:tiny_llama",
        "model.tokenizer": str(tokenizer_dir),
        "model.attention_impl": "reference",
        "mesh.fsdp": 1,
        "sft.data": str(chat_data),
        "sft.eval_fraction": 0.25,  # 6 training examples -> 3 steps per epoch
        "sft.epochs": 2,
        "sft.batch_size": 2,
        "sft.micro_batch_rows": 1,
        "sft.max_seq_len": 128,
        "optim.learning_rate": 1e-3,
        "optim.warmup_ratio": 0.2,
        "checkpoint.every": 2,
        "checkpoint.max_to_keep": "null",
        "run.output_root": str(tmp_path),
        "run.name": name,
        **extra,
    }
    return load_config("base", [f"{k}={v}" for k, v in overrides.items()])


def test_run_writes_metrics_checkpoints_and_a_loadable_hf_folder(tmp_path, tokenizer_dir, chat_data):
    config = make_config(tmp_path, tokenizer_dir, chat_data)
    assert sft_command.run(config) == 0
    run_dir = tmp_path / "run"
    records = read_metrics(run_dir)
    train = [r for r in records if "train/loss" in r]
    assert [r["step"] for r in train] == [1, 2, 3, 4, 5, 6]
    for key in ("train/lr", "train/grad_norm", "train/tokens_per_s", "train/completion_tokens", "train/epoch"):
        assert all(np.isfinite(r[key]) for r in train), key
    assert train[0]["train/lr"] == 0.0 and train[1]["train/lr"] == pytest.approx(1e-3)  # 1 warmup step
    assert [r["step"] for r in records if "eval/loss" in r] == [6]
    assert train[-1]["train/epoch"] == 2.0
    assert sorted(int(p.name) for p in (run_dir / "checkpoints").iterdir() if p.name.isdigit()) == [2, 4, 6]
    assert (run_dir / "config.yaml").is_file() and any((run_dir / "tensorboard").iterdir())

    # The exported folder is the trained policy: same weights as the last checkpoint, and a tokenizer.
    model, model_config = load_hf_checkpoint(run_dir / "hf")
    assert model_config.vocab_size == 49152 and model_config.eos_token_ids == (2,)
    assert (run_dir / "hf" / "tokenizer.json").is_file()
    from jaxrl.training.checkpointing import Checkpointer
    from jaxrl.training.optim import make_optimizer
    from jaxrl.training.trainer import abstract_train_state

    with Checkpointer(run_dir / "checkpoints") as ckpt:
        optimizer, _ = make_optimizer(config.optim, 6)
        mesh = policy.mesh_from_section(config.mesh)
        model_config = policy.policy_config(config.model, load_tokenizer(tokenizer_dir))
        _, target, _ = abstract_train_state(model_config, optimizer, mesh)
        state, _ = ckpt.restore(target)
    exported = jax.tree.leaves(nnx.to_pure_dict(nnx.state(model)))
    for a, b in zip(exported, jax.tree.leaves(state.params)):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


@pytest.mark.slow
def test_a_killed_run_started_again_resumes_and_matches_the_uninterrupted_run(
    tmp_path, tokenizer_dir, chat_data, monkeypatch, capsys
):
    assert sft_command.run(make_config(tmp_path, tokenizer_dir, chat_data, name="straight")) == 0

    original_log = MetricsLogger.log

    def log_then_die(self, step, metrics):
        out = original_log(self, step, metrics)
        if step == 3 and "train/loss" in metrics:
            raise KeyboardInterrupt("killed")
        return out

    monkeypatch.setattr(MetricsLogger, "log", log_then_die)
    with pytest.raises(KeyboardInterrupt):
        sft_command.run(make_config(tmp_path, tokenizer_dir, chat_data, name="killed"))
    monkeypatch.setattr(MetricsLogger, "log", original_log)
    assert not (tmp_path / "killed" / "hf").exists()
    capsys.readouterr()
    assert sft_command.run(make_config(tmp_path, tokenizer_dir, chat_data, name="killed")) == 0
    # Checkpoints every 2 steps: the run killed after step 3 resumes from step 2, and says so.
    assert f"resuming {tmp_path / 'killed'} from its checkpoint at step 2 (data: epoch 0, example 4)" in capsys.readouterr().err

    straight, resumed = read_metrics(tmp_path / "straight"), read_metrics(tmp_path / "killed")
    keys = ("step", "train/loss", "train/grad_norm", "train/lr", "eval/loss")
    assert [{k: r.get(k) for k in keys} for r in resumed] == [{k: r.get(k) for k in keys} for r in straight]
    a, _ = load_hf_checkpoint(tmp_path / "straight" / "hf")
    b, _ = load_hf_checkpoint(tmp_path / "killed" / "hf")
    for x, y in zip(jax.tree.leaves(nnx.state(a)), jax.tree.leaves(nnx.state(b))):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))


def test_bad_setups_are_refused_with_the_key_named(tmp_path, tokenizer_dir, chat_data):
    with pytest.raises(ConfigError, match="sft.data"):
        sft_command.run(make_config(tmp_path, tokenizer_dir, chat_data, **{"sft.data": "null"}))
    with pytest.raises(ConfigError, match="sft.data=/no/such.jsonl: no such file"):
        sft_command.run(make_config(tmp_path, tokenizer_dir, chat_data, **{"sft.data": "/no/such.jsonl"}))
    with pytest.raises(ConfigError, match="model.tokenizer"):
        sft_command.run(make_config(tmp_path, tokenizer_dir, chat_data, **{"model.tokenizer": "null"}))
    with pytest.raises(ConfigError, match="unknown random model preset"):
        sft_command.run(make_config(tmp_path, tokenizer_dir, chat_data, **{"model.source": "random:huge"}))
    with pytest.raises(ConfigError, match="eval_fraction"):
        make_config(tmp_path, tokenizer_dir, chat_data, **{"sft.eval_data": str(chat_data)})
    quick = {"sft.epochs": 1, "checkpoint.export_hf": False}
    done = make_config(tmp_path, tokenizer_dir, chat_data, name="done", **quick)
    assert sft_command.run(done) == 0
    fresh = make_config(tmp_path, tokenizer_dir, chat_data, name="done", **{"checkpoint.resume": False})
    with pytest.raises(ConfigError, match="already has checkpoints"):
        sft_command.run(fresh)


def test_the_shipped_tiny_sft_data_is_prompted_like_evaluation_and_fits_its_config():
    config = load_config("tiny_cpu_sft")
    examples = read_kernelbook(sft_command.find_path(config.sft.data))
    tokenizer = policy.load_tokenizer(config.model)
    assert len(examples) == 8
    rows = [json.loads(line) for line in sft_command.find_path(config.sft.data).read_text().splitlines()]
    for example, row in zip(examples, rows):
        assert list(example.messages) == build_messages(row["python_code"])
        extracted = extract_completion(example.completion)
        assert extracted.code.strip() == row["triton_code"].strip() and "@triton.jit" in extracted.code
        assert extracted.plan.strip() == row["reasoning"].strip()
        tokenized = tokenize_example(example, tokenizer, config.sft.max_seq_len)
        assert tokenized is not None, "an example of the tiny config would be dropped as overlong"
