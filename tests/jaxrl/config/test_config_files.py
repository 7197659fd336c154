"""Every YAML file under configs/ loads and validates; base.yaml is generated from the schema's knobs."""

from __future__ import annotations

from pathlib import Path

import pytest

from jaxrl.config import Config, all_keys, load_config
from jaxrl.config.loader import CONFIG_DIR
from jaxrl.config.yaml_io import load_yaml

CONFIG_FILES = sorted(CONFIG_DIR.rglob("*.yaml"))


def flatten(tree: dict, prefix: str = "") -> dict:
    out = {}
    for key, value in tree.items():
        path = f"{prefix}.{key}" if prefix else key
        out.update(flatten(value, path) if isinstance(value, dict) else {path: value})
    return out


def test_the_expected_files_exist():
    names = {str(p.relative_to(CONFIG_DIR)) for p in CONFIG_FILES}
    assert {"base.yaml", "eval_default.yaml", "eval_cpu_tiny.yaml", "models/qwen3-8b.yaml",
            "models/qwen3-0.6b.yaml", "models/smollm2-135m.yaml"} <= names


@pytest.mark.parametrize("path", CONFIG_FILES, ids=lambda p: str(p.relative_to(CONFIG_DIR)))
def test_every_config_file_validates(path: Path):
    config = load_config(path)
    assert isinstance(config, Config)
    # Keys a file sets itself (not through includes) must reach the Config unchanged in meaning.
    own = load_yaml(path.read_text()) or {}
    own.pop("include", None)
    resolved = flatten(config.to_dict())
    for key, value in flatten(own).items():
        assert key in resolved, f"{path}: {key}"
        assert resolved[key] == (list(value) if isinstance(value, tuple) else value), f"{path}: {key}"


def test_base_yaml_lists_every_key_with_its_schema_default():
    base = flatten(load_yaml((CONFIG_DIR / "base.yaml").read_text()))
    defaults = flatten(Config().to_dict())
    assert sorted(base) == sorted(all_keys(Config)), "base.yaml must list every schema key (and only those)"
    assert base == defaults, "base.yaml and the schema defaults in jaxrl/config/schema.py disagree"


def test_base_yaml_is_generated_from_the_schema_with_each_knobs_comment():
    from jaxrl.config import base_yaml

    assert (CONFIG_DIR / "base.yaml").read_text() == base_yaml.render(), "run python -m jaxrl.config.base_yaml"
    assert "  group_size: 8             # completions per task (G); replaces sampling.num_samples\n" in base_yaml.render()
    assert base_yaml.main(["--check"]) == 0


def test_cpu_sized_configs_only_name_validated_problems():
    from jaxrl.data.cpu_sized import read_ids_file

    validated = read_ids_file()
    for path in CONFIG_FILES:
        config = load_config(path)
        if config.eval.cpu_sized:
            for level in config.eval.levels:
                assert str(level) in validated, f"{path}: level {level} has no CPU-sized list"
                missing = set(config.eval.ids or ()) - set(validated[str(level)])
                assert not missing, f"{path}: ids {sorted(missing)} have no validated CPU-sized variant"
