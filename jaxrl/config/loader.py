"""Read YAML configs with includes, apply `key=value` overrides, and build the typed `Config`.

A YAML file may start with `include: base.yaml` or `include: [base.yaml, models/qwen3-8b.yaml]`
(paths relative to that file): the included files are merged in order, then the file's own keys on
top (mappings merge key by key; lists and scalars replace). Command-line overrides come last, as
dotted keys: `sampling.temperature=0.7`, `eval.levels=[1,2]` or `eval.levels=1,2`, `eval.ids=null`.
Files and override values are YAML 1.1 except that `3e-3` is a float (`yaml_io`).
Unknown keys are errors that say what a TRL or verl name maps to here, or else suggest the closest valid key.
"""

from __future__ import annotations

import dataclasses
import difflib
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import yaml

from jaxrl.config.foreign_names import foreign_hint
from jaxrl.config.schema import Config, ConfigError, coerce, field_types
from jaxrl.config.yaml_io import dump_yaml, load_yaml

REPO_ROOT = Path(__file__).resolve().parents[2]
CONFIG_DIR = REPO_ROOT / "configs"
_KEY = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)*$")


def load_config(path: str | Path | None = None, overrides: Iterable[str] = ()) -> Config:
    """The config of `path` (None: the schema defaults) with `overrides` applied, validated.

    `path` may also be a name under `configs/`, with or without `.yaml` (e.g. "eval_cpu_tiny").
    """
    tree = read_tree(resolve_path(path)) if path is not None else {}
    for override in overrides:
        apply_override(tree, override)
    return build(Config, tree)


def dump_config(config: Config, path: str | Path) -> None:
    """Write the fully resolved config as YAML; `load_config(path)` reads back an equal Config."""
    Path(path).write_text(dump_yaml(config.to_dict()))


def resolve_path(path: str | Path) -> Path:
    candidates = [Path(path), CONFIG_DIR / path, CONFIG_DIR / f"{path}.yaml"]
    for candidate in candidates:
        if candidate.is_file():
            return candidate
    raise FileNotFoundError(f"config file not found: {path} (looked at {', '.join(map(str, candidates))})")


def read_tree(path: Path, _stack: tuple[Path, ...] = ()) -> dict[str, Any]:
    """The merged mapping of a YAML file and everything it includes."""
    path = path.resolve()
    if path in _stack:
        cycle = " -> ".join(str(p) for p in (*_stack, path))
        raise ConfigError(f"config include cycle: {cycle}")
    try:
        data = load_yaml(path.read_text())
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: invalid YAML: {exc}") from exc
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: a config file must be a mapping of sections, got {type(data).__name__}")
    includes = data.pop("include", [])
    if isinstance(includes, str):
        includes = [includes]
    if not isinstance(includes, list) or not all(isinstance(i, str) for i in includes):
        raise ConfigError(f"{path}: include must be a file name or a list of file names")
    tree: dict[str, Any] = {}
    for include in includes:
        included = path.parent / include
        if not included.is_file():
            raise ConfigError(f"{path}: included file not found: {included}")
        _merge(tree, read_tree(included, (*_stack, path)))
    _merge(tree, data)
    return tree


def _merge(into: dict[str, Any], update: dict[str, Any]) -> None:
    for key, value in update.items():
        if isinstance(value, dict) and isinstance(into.get(key), dict):
            _merge(into[key], value)
        else:
            into[key] = value


def apply_override(tree: dict[str, Any], override: str) -> None:
    """Set one `dotted.key=value` in the tree; the value stays a string until the schema types it."""
    key, sep, value = override.partition("=")
    key = key.strip()
    if not sep or not _KEY.match(key):
        raise ConfigError(f"override must look like section.key=value, got {override!r}")
    *parents, leaf = key.split(".")
    node = tree
    for i, part in enumerate(parents):
        child = node.setdefault(part, {})
        if not isinstance(child, dict):
            raise ConfigError(f"override {override!r}: {'.'.join(parents[: i + 1])} is not a section")
        node = child
    node[leaf] = value


def build(cls: type, tree: Any, prefix: str = "") -> Any:
    """An instance of the dataclass `cls` from a nested mapping, naming the key in every error."""
    where = prefix or "config"
    if not isinstance(tree, dict):
        raise ConfigError(f"{where} must be a mapping of keys, got {tree!r}")
    fields = {f.name: f for f in dataclasses.fields(cls)}
    for key in tree:
        if key not in fields:
            raise ConfigError(f"unknown config key {_join(prefix, key)!r}{_suggest(cls, prefix, str(key), tree[key])}")
    kwargs = {}
    hints = field_types(cls)
    for key, value in tree.items():
        annotation = hints[key]
        if dataclasses.is_dataclass(annotation):
            kwargs[key] = build(annotation, value, _join(prefix, key))
        else:
            kwargs[key] = coerce(value, annotation, _join(prefix, key))
    try:
        return cls(**kwargs)
    except ConfigError as exc:
        raise ConfigError(f"{where}: {exc}") from None


def _join(prefix: str, key: str) -> str:
    return f"{prefix}.{key}" if prefix else key


def _suggest(cls: type, prefix: str, key: str, value: Any) -> str:
    """What the user probably meant: our name for a TRL or verl knob, else the closest key."""
    for path in _leaf_paths(_join(prefix, key), value):
        hint = foreign_hint(path)
        if hint is not None:
            return f": {hint}"
    names = [f.name for f in dataclasses.fields(cls)]
    close = difflib.get_close_matches(key, names, n=1, cutoff=0.6)
    if close:
        return f"; did you mean {_join(prefix, close[0])!r}?"
    elsewhere = [path for path in all_keys(Config) if path.rsplit(".", 1)[-1] == key]
    if elsewhere:
        return f"; did you mean {' or '.join(repr(p) for p in elsewhere)}?"
    return f"; valid keys here: {', '.join(names)}"


def _leaf_paths(path: str, value: Any) -> list[str]:
    """The dotted keys a (possibly nested) value sets under `path`, e.g. a verl tree given as YAML."""
    if not isinstance(value, dict):
        return [path]
    return [leaf for k, v in value.items() for leaf in _leaf_paths(f"{path}.{k}", v)]


def all_keys(cls: type, prefix: str = "") -> list[str]:
    """Every leaf key of the schema as a dotted path."""
    keys = []
    for name, annotation in field_types(cls).items():
        if dataclasses.is_dataclass(annotation):
            keys += all_keys(annotation, _join(prefix, name))
        else:
            keys.append(_join(prefix, name))
    return keys
