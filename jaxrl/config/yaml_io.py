"""YAML for configs: PyYAML's safe YAML 1.1, except that `1e-5` is a float.

YAML 1.1 only reads a float with a dot and a signed exponent (`1.0e-05`), so `learning_rate: 3e-3`
or the override `optim.learning_rate=3e-3` would be the string "3e-3". Every config file and
override value is read with `load_yaml`, and `dump_yaml` quotes strings that would read back as floats.
"""

from __future__ import annotations

import re
from typing import Any

import yaml

_FLOAT_TAG = "tag:yaml.org,2002:float"
# Scientific notation, as in YAML 1.2's core schema: a mantissa with an exponent (`e5`, `1e` are not numbers).
_SCIENTIFIC = re.compile(r"^[-+]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)[eE][-+]?[0-9]+$")
_FIRST_CHARS = list("-+.0123456789")


class _Loader(yaml.SafeLoader):
    pass


class _Dumper(yaml.SafeDumper):
    pass


_Loader.add_implicit_resolver(_FLOAT_TAG, _SCIENTIFIC, _FIRST_CHARS)
_Dumper.add_implicit_resolver(_FLOAT_TAG, _SCIENTIFIC, _FIRST_CHARS)


def load_yaml(text: str) -> Any:
    """`yaml.safe_load` with scientific-notation floats; raises yaml.YAMLError on bad YAML."""
    return yaml.load(text, Loader=_Loader)


def dump_yaml(data: Any) -> str:
    """`yaml.safe_dump` (keys in insertion order) whose output `load_yaml` reads back unchanged."""
    return yaml.dump(data, Dumper=_Dumper, sort_keys=False)
