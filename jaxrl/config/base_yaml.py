"""configs/base.yaml, generated from the schema: every key with the default and comment its `knob` declares.

    python -m jaxrl.config.base_yaml           # rewrite configs/base.yaml
    python -m jaxrl.config.base_yaml --check   # exit 1 when the file differs from what the schema gives

The schema is the one place a knob's default, bounds and description are written; the YAML file is the
readable list that run files include (tests/jaxrl/config keeps it current).
"""

from __future__ import annotations

import argparse
import dataclasses
import sys

import yaml

from jaxrl.config.loader import CONFIG_DIR
from jaxrl.config.schema import Config, field_types

PATH = CONFIG_DIR / "base.yaml"
COMMENT_COLUMN = 28
HEADER = """\
# Every configuration key with its default and what it means, generated from jaxrl/config/schema.py (where each
# knob is declared once) by `python -m jaxrl.config.base_yaml`: edit the schema, not this file. Run files include
# it and set what differs; override any key on the command line:
# python -m jaxrl.main eval --config configs/eval_default.yaml sampling.temperature=0.7
"""


def render() -> str:
    """The text of configs/base.yaml for the current schema."""
    sections = []
    for section in dataclasses.fields(Config):
        cls = field_types(Config)[section.name]
        lines = [_commented(f"{section.name}:", cls.yaml_note)]
        for field in dataclasses.fields(cls):
            lines.append(_commented(f"  {field.name}: {_value(field.default)}", field.metadata.get("doc", "")))
        sections.append("\n".join(lines))
    return HEADER + "\n" + "\n\n".join(sections) + "\n"


def _value(value: object) -> str:
    plain = list(value) if isinstance(value, tuple) else value
    return yaml.safe_dump(plain, default_flow_style=True).removesuffix("\n...\n").strip()


def _commented(text: str, doc: str) -> str:
    """`text` with `doc` as a comment at COMMENT_COLUMN (at least two spaces after it), one `#` per doc line."""
    if not doc:
        return text
    first, *rest = doc.split("\n")
    lines = [f"{text.ljust(COMMENT_COLUMN - 2)}  # {first}"]
    lines += [f"{' ' * COMMENT_COLUMN}# {line}" for line in rest]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m jaxrl.config.base_yaml", description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 when configs/base.yaml is stale")
    args = parser.parse_args(argv)
    text = render()
    if args.check:
        if PATH.read_text() != text:
            print(f"{PATH} is stale: run python -m jaxrl.config.base_yaml", file=sys.stderr)
            return 1
        return 0
    PATH.write_text(text)
    print(f"wrote {PATH}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
