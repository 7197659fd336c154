"""HF safetensors folders: logits parity with transformers, export round trip, sharded index, errors."""

from __future__ import annotations

import json
import shutil

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx
from safetensors.numpy import load_file, save_file

from jaxrl.checkpoint import export_hf, hf_state_dict, load_hf_checkpoint

pytest.importorskip("torch")
PARITY_ATOL = 1e-4


@nnx.jit
def _logits(model, tokens):
    positions = jnp.broadcast_to(jnp.arange(tokens.shape[1]), tokens.shape)
    return model(tokens, positions)[0]


def test_logits_match_transformers(hf_checkpoint, tokens, hf_logits):
    family, hf_model, folder = hf_checkpoint
    model, config = load_hf_checkpoint(folder)
    assert config.family == family and config.param_dtype == "float32"
    expected = hf_logits(hf_model, tokens)
    assert expected.std() > 0.5  # large enough that a wrong mapping could not hide under the tolerance
    np.testing.assert_allclose(_logits(model, jnp.asarray(tokens)), expected, atol=PARITY_ATOL, rtol=0)


def test_export_round_trip_through_transformers(hf_checkpoint, tokens, tmp_path, hf_logits):
    from transformers import AutoModelForCausalLM

    _, hf_model, folder = hf_checkpoint
    model, config = load_hf_checkpoint(folder)
    export_hf(model, config, tmp_path / "export")
    assert sorted(p.name for p in (tmp_path / "export").iterdir()) == ["config.json", "model.safetensors"]
    reloaded = AutoModelForCausalLM.from_pretrained(tmp_path / "export").float().eval()
    # Same weights, bit for bit, so transformers computes identical logits.
    np.testing.assert_array_equal(hf_logits(reloaded, tokens), hf_logits(hf_model, tokens))
    original = {k: v.numpy() for k, v in hf_model.state_dict().items() if not (config.tie_embeddings and k == "lm_head.weight")}
    exported = load_file(tmp_path / "export" / "model.safetensors")
    assert sorted(exported) == sorted(original)


def test_sharded_export_loads_back(hf_checkpoint, tokens, tmp_path, hf_logits):
    from transformers import AutoModelForCausalLM

    _, hf_model, folder = hf_checkpoint
    model, config = load_hf_checkpoint(folder)
    out = export_hf(model, config, tmp_path / "sharded", max_shard_bytes=64 * 1024)
    index = json.loads((out / "model.safetensors.index.json").read_text())
    files = sorted(set(index["weight_map"].values()))
    assert len(files) > 2 and not (out / "model.safetensors").exists()

    reloaded, reloaded_config = load_hf_checkpoint(out)
    assert reloaded_config == config
    for a, b in zip(jax.tree.leaves(nnx.state(model)), jax.tree.leaves(nnx.state(reloaded))):
        np.testing.assert_array_equal(a, b)
    by_transformers = AutoModelForCausalLM.from_pretrained(out).float().eval()
    np.testing.assert_array_equal(hf_logits(by_transformers, tokens), hf_logits(hf_model, tokens))


def test_bfloat16_loading(hf_checkpoint, tokens, hf_logits):
    _, hf_model, folder = hf_checkpoint
    model, config = load_hf_checkpoint(folder, dtype="bfloat16")
    assert config.dtype == config.param_dtype == "bfloat16"
    assert {leaf.dtype for leaf in jax.tree.leaves(nnx.state(model))} == {jnp.dtype("bfloat16")}
    logits = _logits(model, jnp.asarray(tokens))
    assert logits.dtype == jnp.float32
    expected = hf_logits(hf_model, tokens)
    assert np.abs(np.asarray(logits) - expected).max() < 0.1 * np.abs(expected).max()
    mixed, mixed_config = load_hf_checkpoint(folder, dtype="bfloat16", param_dtype="float32")
    assert mixed_config.param_dtype == "float32" and mixed_config.dtype == "bfloat16"
    assert {leaf.dtype for leaf in jax.tree.leaves(nnx.state(mixed))} == {jnp.dtype("float32")}


def test_state_dict_names_match_transformers(hf_checkpoint):
    _, hf_model, folder = hf_checkpoint
    model, config = load_hf_checkpoint(folder)
    ours = hf_state_dict(model, config)
    for name, value in hf_model.state_dict().items():
        if config.tie_embeddings and name == "lm_head.weight":
            assert name not in ours
            continue
        np.testing.assert_array_equal(ours[name], value.numpy(), err_msg=name)


def _rewrite(folder, tmp_path, edit):
    broken = tmp_path / "broken"
    shutil.copytree(folder, broken)
    tensors = load_file(broken / "model.safetensors")
    edit(tensors)
    save_file(tensors, broken / "model.safetensors", metadata={"format": "pt"})
    return broken


def test_bad_checkpoints_are_rejected(hf_checkpoint, tmp_path):
    _, _, folder = hf_checkpoint
    with pytest.raises(ValueError, match="lacks 1 weights"):
        load_hf_checkpoint(_rewrite(folder, tmp_path / "a", lambda t: t.pop("model.layers.1.mlp.up_proj.weight")))
    with pytest.raises(ValueError, match="no mapping"):
        load_hf_checkpoint(_rewrite(folder, tmp_path / "b", lambda t: t.update(extra=np.zeros(3, np.float32))))
    with pytest.raises(ValueError, match="shape"):
        load_hf_checkpoint(_rewrite(folder, tmp_path / "c", lambda t: t.update(
            {"model.norm.weight": np.ones(7, np.float32)})))
    with pytest.raises(FileNotFoundError, match="model.safetensors"):
        (tmp_path / "empty").mkdir()
        (tmp_path / "empty" / "config.json").write_text((folder / "config.json").read_text())
        load_hf_checkpoint(tmp_path / "empty")


def test_tied_checkpoint_may_carry_a_head_copy(tmp_path, tokens, make_hf_model, hf_logits):
    hf_model = make_hf_model("llama")
    hf_model.save_pretrained(tmp_path)
    tensors = load_file(tmp_path / "model.safetensors")
    tensors["lm_head.weight"] = tensors["model.embed_tokens.weight"].copy()
    save_file(tensors, tmp_path / "model.safetensors", metadata={"format": "pt"})
    model, config = load_hf_checkpoint(tmp_path)
    assert config.tie_embeddings and not hasattr(model, "lm_head")
    np.testing.assert_allclose(_logits(model, jnp.asarray(tokens)), hf_logits(hf_model, tokens), atol=PARITY_ATOL)
