"""`jaxrl.policy`: from `model.source` to a policy and its tokenizer (bundled model, GGUF file, Hugging Face folder,
a repository id in the local Hugging Face cache, random weights), checked before anything loads; the mesh."""

from __future__ import annotations

import shutil

import pytest
from tiny_hf import VOCAB, save_tiny_tokenizer

from jaxrl.config import ConfigError, MeshSection, ModelSection
from jaxrl.policy import check_source, load_model, mesh_from_section, resolve_source


def test_sources_resolve_to_a_format_and_a_path(tmp_path, tiny_checkpoint):
    kind, path = resolve_source("smollm2-135m")
    assert kind == "gguf" and path.name.endswith(".gguf") and path.is_file()
    gguf = tmp_path / "model.gguf"
    gguf.write_bytes(b"GGUF")
    assert resolve_source(str(gguf)) == ("gguf", gguf)
    assert resolve_source(str(tiny_checkpoint)) == ("hf", tiny_checkpoint)


@pytest.mark.parametrize(
    "kind, error, message",
    [
        ("missing", FileNotFoundError, r"no such file or folder, and not a bundled model \(bundled: smollm2-135m\)"),
        ("folder", ValueError, "is a folder without config.json"),
        ("file", ValueError, "is a file but not a .gguf file"),
    ],
)
def test_bad_sources_say_what_is_wrong(tmp_path, kind, error, message):
    source = {"missing": tmp_path / "missing", "folder": tmp_path, "file": tmp_path / "weights.bin"}[kind]
    (tmp_path / "weights.bin").write_bytes(b"")
    with pytest.raises(error, match=message):
        resolve_source(str(source))


@pytest.fixture
def hf_cache(tmp_path, monkeypatch, tiny_checkpoint):
    """A local Hugging Face cache (huggingface_hub's layout) holding `tiny/llama` at one revision."""
    from huggingface_hub import constants

    repo = tmp_path / "hub" / "models--tiny--llama"
    snapshot = repo / "snapshots" / "0123abcd"
    shutil.copytree(tiny_checkpoint, snapshot)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text("0123abcd")
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    return snapshot


def test_a_repository_id_in_the_local_hugging_face_cache_is_a_source(hf_cache):
    assert resolve_source("tiny/llama") == ("hf", hf_cache)
    _, config, tokenizer = load_model(ModelSection(source="tiny/llama", attention_impl="reference"))
    assert config.num_layers == 2 and tokenizer.eos_token == "<eos>"


def test_a_repository_id_not_in_the_cache_says_where_it_looked_and_how_to_get_it(hf_cache):
    with pytest.raises(FileNotFoundError, match=r"not in the local cache \(.*hub\): download it there first "
                                                r"\(huggingface-cli download Qwen/Qwen3-0.6B\)"):
        resolve_source("Qwen/Qwen3-0.6B")


@pytest.mark.parametrize(
    "section, message",
    [
        (ModelSection(source="random:tiny_llama"), "is a random model: set model.tokenizer"),
        (ModelSection(source="random:huge", tokenizer="smollm2-135m"), "unknown random model preset 'huge'"),
        (ModelSection(source="smollm2-135m", tokenizer="/no/such/tokenizer"), "model.tokenizer '/no/such/tokenizer': no such"),
        (ModelSection(source="/no/such/model"), "model.source '/no/such/model': no such file or folder"),
    ],
)
def test_check_source_fails_before_anything_loads(section, message):
    with pytest.raises(ConfigError, match=message):
        check_source(section)


def test_an_hf_folder_loads_with_the_section_dtypes_and_options(tiny_checkpoint):
    section = ModelSection(source=str(tiny_checkpoint), dtype="bfloat16", param_dtype="float32",
                           attention_impl="reference", remat="full")
    model, config, tokenizer = load_model(section)
    assert (config.family, config.num_layers, config.vocab_size) == ("llama", 2, len(VOCAB))
    assert (config.dtype, config.param_dtype, config.attention_impl, config.remat) == (
        "bfloat16", "float32", "reference", "full")
    assert tokenizer("w0 w1")["input_ids"] == [5, 6]


def test_the_tokenizer_can_come_from_another_folder(tiny_checkpoint, tmp_path):
    weights_only = tmp_path / "weights_only"
    weights_only.mkdir()
    for name in ("config.json", "model.safetensors"):
        shutil.copy(tiny_checkpoint / name, weights_only / name)
    with pytest.raises(FileNotFoundError, match="holds no tokenizer .*; set model.tokenizer"):
        load_model(ModelSection(source=str(weights_only)))
    save_tiny_tokenizer(tmp_path / "tok")
    _, _, tokenizer = load_model(ModelSection(source=str(weights_only), tokenizer=str(tmp_path / "tok")))
    assert tokenizer.eos_token == "<eos>"


def test_mesh_sizes_pick_devices():
    # conftest gives 8 fake CPU devices.
    assert mesh_from_section(MeshSection(data=1, fsdp=1, tensor=1)).devices.size == 1
    assert dict(mesh_from_section(MeshSection(data=1, fsdp=-1, tensor=2)).shape) == {"data": 1, "fsdp": 4, "tensor": 2}
    with pytest.raises(ValueError, match="needs 16 devices; 8 available"):
        mesh_from_section(MeshSection(data=2, fsdp=8, tensor=1))
