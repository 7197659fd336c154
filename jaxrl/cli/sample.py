"""`python -m jaxrl.main sample`: generate from one prompt with the configured model.

    python -m jaxrl.main sample model=smollm2-135m prompt="def relu(x):" max_new_tokens=32 temperature=0 --json

The prompt is `sample.prompt` or the contents of `sample.prompt_file`, used as raw text;
`sample.chat=true` wraps it as one user message in the tokenizer's chat template. Sampling follows
the `sampling` section (temperature 0 = greedy), the model the `model` section (a checkpoint folder,
a GGUF file, `smollm2-135m` ...: see `jaxrl.policy`), the device mesh the `mesh` section.
Besides the dotted keys, this command takes the short forms of `SAMPLE_ALIASES` (`model=`,
`prompt=`, `max_new_tokens=`, `temperature=` ...): `expand_aliases` rewrites them before the
config is loaded.

Output: the completion text on stdout. With --json, exactly one JSON object on one line: `text`,
`token_ids` (the new tokens only), `logprobs` (one per token, see `jaxrl.sampling.logits`),
`finish_reason` and `prompt_tokens`; with `sampling.num_samples` > 1 those fields describe the first
sample and `samples` lists every sample with the same four fields.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from jaxrl.config import Config, ConfigError, SampleSection
from jaxrl.sampling.api import Completion

SAMPLE_ALIASES: dict[str, str] = {
    "model": "model.source",
    "tokenizer": "model.tokenizer",
    "prompt": "sample.prompt",
    "prompt_file": "sample.prompt_file",
    "chat": "sample.chat",
    "max_new_tokens": "sampling.max_new_tokens",
    "temperature": "sampling.temperature",
    "top_p": "sampling.top_p",
    "top_k": "sampling.top_k",
    "seed": "sampling.seed",
    "num_samples": "sampling.num_samples",
    "stop": "sampling.stop",
}


def expand_aliases(overrides: Iterable[str], aliases: dict[str, str] = SAMPLE_ALIASES) -> list[str]:
    """`overrides` with each short key (`prompt=...`) replaced by its dotted key (`sample.prompt=...`)."""
    expanded = []
    for override in overrides:
        key, sep, value = override.partition("=")
        target = aliases.get(key.strip()) if sep else None
        expanded.append(f"{target}={value}" if target else override)
    return expanded


def prompt_text(section: SampleSection) -> str:
    """The raw prompt of the section (not yet templated); ConfigError when none or an unreadable file."""
    if section.prompt is not None:
        text = section.prompt
    elif section.prompt_file is not None:
        path = Path(section.prompt_file).expanduser()
        if not path.is_file():
            raise ConfigError(f"sample.prompt_file {section.prompt_file!r}: no such file")
        text = path.read_text()
    else:
        raise ConfigError("no prompt: give prompt=TEXT or prompt_file=PATH (sample.prompt / sample.prompt_file)")
    if not text:
        raise ConfigError("the prompt is empty")
    return text


def render(text: str, tokenizer: Any, chat: bool) -> str:
    """The text the sampler sees: as is, or as a user message through the chat template."""
    if not chat:
        return text
    from jaxrl.data.prompts import render_prompt

    try:
        return render_prompt(tokenizer, [{"role": "user", "content": text}])
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"chat=true needs a tokenizer with a chat template: {exc}") from exc


def completion_json(completion: Completion) -> dict[str, Any]:
    return {
        "text": completion.text,
        "token_ids": list(completion.token_ids),
        "logprobs": list(completion.logprobs),
        "finish_reason": completion.finish_reason,
    }


def run_sample(config: Config, *, as_json: bool) -> int:
    """Loads the model, samples `sampling.num_samples` completions of the prompt, prints them; 0 on success."""
    from jaxrl.policy import check_source, load_model, mesh_from_section
    from jaxrl.sampling.sampler import Sampler, SamplerConfig, params_from_section

    text = prompt_text(config.sample)  # cheap checks before loading any weights
    check_source(config.model)
    mesh = mesh_from_section(config.mesh)
    model, _, tokenizer = load_model(config.model, mesh)
    prompt = render(text, tokenizer, config.sample.chat)
    sampler = Sampler(model, tokenizer, SamplerConfig.from_section(config.sampling), mesh=mesh)
    try:
        (completions,) = sampler.generate([prompt], params_from_section(config.sampling))
    except ValueError as exc:  # e.g. a prompt over sampling.max_prompt_tokens
        raise ConfigError(str(exc)) from exc
    if as_json:
        result = {**completion_json(completions[0]), "prompt_tokens": len(sampler.encode(prompt))}
        if len(completions) > 1:
            result["samples"] = [completion_json(c) for c in completions]
        print(json.dumps(result, ensure_ascii=False))
    elif len(completions) == 1:
        print(completions[0].text)
    else:
        for i, completion in enumerate(completions):
            print(f"--- sample {i} ({completion.finish_reason}) ---\n{completion.text}")
    return 0
