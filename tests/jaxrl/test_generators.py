"""From `model.source` to a generator: source resolution, checkpoint + tokenizer loading, chat rendering, mesh."""

from __future__ import annotations

import shutil

import pytest

from jaxrl.config import MeshSection, ModelSection, SamplingSection
from jaxrl.generators import TemplatedGenerator, load_generator, load_model, mesh_from_section, resolve_source
from jaxrl.sampling.api import Completion, SamplingParams

CHAT_TEMPLATE = (
    "{% for m in messages %}<|{{ m['role'] }}|> {{ m['content'] }} {% endfor %}"
    "{% if add_generation_prompt %}<|assistant|> {% endif %}"
)
VOCAB = ["<unk>", "<eos>", "<|system|>", "<|user|>", "<|assistant|>"] + [f"w{i}" for i in range(123)]


def save_tiny_tokenizer(folder) -> None:
    """A whitespace word-level tokenizer over VOCAB (128 ids) with a chat template, saved like a checkpoint's."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    backend = Tokenizer(models.WordLevel({w: i for i, w in enumerate(VOCAB)}, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=backend, unk_token="<unk>", eos_token="<eos>")
    tokenizer.chat_template = CHAT_TEMPLATE
    tokenizer.save_pretrained(folder)


@pytest.fixture(scope="module")
def tiny_checkpoint(tmp_path_factory):
    """A random 2-layer Llama checkpoint folder with its tokenizer, as a user would bring one."""
    import torch
    from transformers import AutoModelForCausalLM, LlamaConfig

    folder = tmp_path_factory.mktemp("tiny_llama")
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=len(VOCAB), hidden_size=64, intermediate_size=96, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256,
                         tie_word_embeddings=True, eos_token_id=1, bos_token_id=None)
    AutoModelForCausalLM.from_config(config, dtype=torch.float32).save_pretrained(folder)
    save_tiny_tokenizer(folder)
    return folder


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


def test_templated_generator_renders_with_the_chat_template_and_delegates_generation(tiny_checkpoint):
    from jaxrl.checkpoint import load_tokenizer

    class Echo:
        def generate(self, prompts, params):
            return [[Completion(p.upper(), (), (), "stop")] * params.num_samples for p in prompts]

    generator = TemplatedGenerator(Echo(), load_tokenizer(tiny_checkpoint))
    prompt = generator.render([{"role": "system", "content": "w1"}, {"role": "user", "content": "w2 w3"}])
    assert prompt == "<|system|> w1 <|user|> w2 w3 <|assistant|> "
    out = generator.generate([prompt], SamplingParams(num_samples=2))
    assert [c.text for c in out[0]] == [prompt.upper()] * 2


def test_load_generator_samples_from_the_checkpoint(tiny_checkpoint):
    generator = load_generator(ModelSection(source=str(tiny_checkpoint), attention_impl="reference"),
                               sampling=SamplingSection(batch_size=4, max_prompt_tokens=64))
    prompt = generator.render([{"role": "user", "content": "w1 w2 w3"}])
    out = generator.generate([prompt, prompt], SamplingParams(temperature=1.0, max_new_tokens=5, num_samples=2, seed=3))
    assert [len(samples) for samples in out] == [2, 2]
    for completion in (c for samples in out for c in samples):
        assert 1 <= len(completion.token_ids) <= 5 and len(completion.logprobs) == len(completion.token_ids)
        assert completion.finish_reason in ("stop", "length")


def test_mesh_sizes_pick_devices():
    # conftest gives 8 fake CPU devices.
    assert mesh_from_section(MeshSection(data=1, fsdp=1, tensor=1)).devices.size == 1
    assert dict(mesh_from_section(MeshSection(data=1, fsdp=-1, tensor=2)).shape) == {"data": 1, "fsdp": 4, "tensor": 2}
    with pytest.raises(ValueError, match="needs 16 devices; 8 available"):
        mesh_from_section(MeshSection(data=2, fsdp=8, tensor=1))
