"""`python -m jaxrl.main sample`: short-form keys, prompt sources, chat wrapping, and the JSON output."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from jaxrl.checkpoint import export_hf
from jaxrl.config import Config, ConfigError, all_keys, load_config
from jaxrl.sampling import Sampler, SamplerConfig, SamplingParams
from jaxrl.cli.sample import SAMPLE_ALIASES, expand_aliases, run_sample

REPO_ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory, qwen3_model, char_tokenizer):
    """A tiny random Qwen3 HF folder with the character tokenizer (and its chat template) beside it."""
    folder = tmp_path_factory.mktemp("tiny_ckpt")
    return export_hf(qwen3_model, qwen3_model.config, folder, tokenizer=char_tokenizer)


def _config(checkpoint, *overrides):
    return load_config(None, expand_aliases([f"model={checkpoint}", "mesh.fsdp=1", *overrides]))


def test_short_forms_map_to_config_keys():
    assert expand_aliases(["model=/ckpt", "prompt=a=b", "temperature=0", "sampling.seed=3", "chat=true"]) == [
        "model.source=/ckpt", "sample.prompt=a=b", "sampling.temperature=0", "sampling.seed=3", "sample.chat=true"]
    config = load_config(None, expand_aliases(["max_new_tokens=7", "prompt_file=p.txt", "stop=[END]"]))
    assert (config.sampling.max_new_tokens, config.sample.prompt_file, config.sampling.stop) == (7, "p.txt", ("END",))
    assert set(SAMPLE_ALIASES.values()) <= set(all_keys(Config))  # every alias names a real key


def test_json_output_is_the_samplers_greedy_completion(checkpoint, qwen3_model, char_tokenizer, capsys):
    config = _config(checkpoint, "prompt=def relu(x):", "max_new_tokens=8", "temperature=0")
    assert run_sample(config, as_json=True) == 0
    out = capsys.readouterr().out
    result = json.loads(out)
    assert out.count("\n") == 1 and set(result) == {"text", "token_ids", "logprobs", "finish_reason", "prompt_tokens"}
    sampler = Sampler(qwen3_model, char_tokenizer, SamplerConfig())
    (expected,) = sampler.generate(["def relu(x):"], SamplingParams(temperature=0.0, max_new_tokens=8))[0]
    assert result["token_ids"] == list(expected.token_ids) and result["text"] == expected.text
    assert result["logprobs"] == pytest.approx(expected.logprobs, abs=1e-5)
    assert result["prompt_tokens"] == len("def relu(x):")


def test_prompt_file_chat_and_several_samples(checkpoint, char_tokenizer, tmp_path, capsys):
    prompt = tmp_path / "prompt.txt"
    prompt.write_text("hello")
    config = _config(checkpoint, f"prompt_file={prompt}", "chat=true", "max_new_tokens=4", "num_samples=2",
                     "temperature=1.0")
    assert run_sample(config, as_json=True) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["prompt_tokens"] == len("<user>hello\n<assistant>")  # the chat template was applied
    assert len(result["samples"]) == 2 and result["samples"][0]["token_ids"] == result["token_ids"]
    assert run_sample(_config(checkpoint, "prompt=hi", "max_new_tokens=3"), as_json=False) == 0
    assert capsys.readouterr().out.endswith("\n")


@pytest.mark.parametrize(
    "overrides, message",
    [
        ([], "no prompt"),
        (["prompt_file=/does/not/exist.txt"], "no such file"),
        (["prompt="], "empty"),
    ],
)
def test_bad_prompts_are_config_errors(checkpoint, overrides, message):
    with pytest.raises(ConfigError, match=message):
        run_sample(_config(checkpoint, *overrides), as_json=True)


def test_bad_model_and_conflicting_prompts_are_config_errors(tmp_path):
    with pytest.raises(ConfigError, match="no such file or folder"):
        run_sample(load_config(None, expand_aliases([f"model={tmp_path / 'missing'}", "prompt=x"])), as_json=True)
    with pytest.raises(ConfigError, match="not both"):
        load_config(None, expand_aliases(["prompt=x", "prompt_file=y"]))


def test_the_command_line_prints_one_json_object(checkpoint):
    env = {**os.environ, "JAX_PLATFORMS": "cpu", "HF_HUB_OFFLINE": "1"}
    argv = [sys.executable, "-m", "jaxrl.main", "sample", "--json", f"model.source={checkpoint}",
            "sample.prompt=x = ", "sampling.max_new_tokens=5", "sampling.temperature=0", "mesh.fsdp=1"]
    done = subprocess.run(argv, cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert len(result["token_ids"]) == len(result["logprobs"]) <= 5
