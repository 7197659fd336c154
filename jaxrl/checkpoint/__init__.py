"""Weights in and out of `jaxrl.models.Transformer`.

Public API:
    load_hf_checkpoint(folder, dtype=None, mesh=None, *, param_dtype=None, **overrides) -> (model, config)
    export_hf(model, config, folder, *, dtype=None, max_shard_bytes=None, tokenizer=None) -> Path
    hf_state_dict(model, config, dtype=None) -> {hf_name: np.ndarray}
    load_gguf(path, dtype="float32", mesh=None, *, param_dtype=None, **overrides) -> (model, config)
    bundled_smollm2_path() -> Path
    load_tokenizer(folder_or_gguf) -> transformers tokenizer
Mapping tables (one per family and format) live in `mapping.py`; `loader.build_model` applies them.
"""

from jaxrl.checkpoint.bundled import bundled_smollm2_path
from jaxrl.checkpoint.gguf_loader import load_gguf
from jaxrl.checkpoint.hf import export_hf, hf_state_dict, load_hf_checkpoint
from jaxrl.checkpoint.tokenizer import load_tokenizer

__all__ = ["bundled_smollm2_path", "export_hf", "hf_state_dict", "load_gguf", "load_hf_checkpoint", "load_tokenizer"]
