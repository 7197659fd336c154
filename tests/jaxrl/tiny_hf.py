"""A random 2-layer Llama Hugging Face checkpoint folder with a word-level tokenizer, as a user would bring one."""

from __future__ import annotations

import pytest

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
