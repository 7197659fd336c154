"""Config YAML: YAML 1.1 plus scientific-notation floats, and a dump that reads back unchanged."""

from __future__ import annotations

import pytest

from jaxrl.config.yaml_io import dump_yaml, load_yaml


@pytest.mark.parametrize(
    "text, number",
    [("1e-5", 1e-5), ("3e-3", 3e-3), ("2.5E+4", 2.5e4), ("-1e3", -1000.0), ("+.5e1", 5.0), ("1.e2", 100.0),
     ("1.0e-05", 1e-5), ("0.7", 0.7), ("12", 12)],
)
def test_numbers(text, number):
    value = load_yaml(text)
    assert value == number and type(value) is type(number)


@pytest.mark.parametrize("text", ["e5", "1e", "1e-", "1e5x", "1e 5", "1e-5.0", "1e5e5", "1_0e3"])
def test_lookalikes_stay_strings(text):
    assert load_yaml(text) == text


def test_inside_mappings_and_lists():
    assert load_yaml("optim: {learning_rate: 3e-3}\nk: [1e2, e2]") == {"optim": {"learning_rate": 3e-3}, "k": [100.0, "e2"]}


def test_dumped_strings_that_read_as_floats_are_quoted():
    data = {"name": "1e-5", "lr": 3e-3, "other": "e5"}
    assert load_yaml(dump_yaml(data)) == data
    assert "'1e-5'" in dump_yaml(data)
