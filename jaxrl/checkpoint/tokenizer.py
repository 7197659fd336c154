"""Tokenizers (and their chat templates) from transformers, for HF folders and GGUF files alike."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def load_tokenizer(source: str | Path) -> Any:
    """A transformers tokenizer from a checkpoint folder, or built from a .gguf file's metadata.

    Never touches the network: the tests and the GPU machine run with HF_HUB_OFFLINE=1.
    """
    from transformers import AutoTokenizer

    path = Path(source)
    if path.is_file() and path.suffix == ".gguf":
        return AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)
    if path.is_dir():
        return AutoTokenizer.from_pretrained(str(path))
    raise FileNotFoundError(f"{path} is neither a checkpoint folder nor a .gguf file")
