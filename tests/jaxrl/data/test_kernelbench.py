"""KernelBench loading: the shared JSONL, KernelBench-style folders, selection and bad input."""

from __future__ import annotations

import json

import pytest

from jaxrl.data.kernelbench import Problem, load_problems

MINIMAL = """import torch
import torch.nn as nn

class Model(nn.Module):
    def forward(self, x):
        return x + 1

def get_inputs():
    return [torch.rand(4)]

def get_init_inputs():
    return []
"""


def test_shared_dataset_loads_all_levels_sorted(kernelbench_path, kernelbench_rows):
    problems = load_problems(kernelbench_path)
    assert len(problems) == len(kernelbench_rows) == 270
    counts = {level: sum(p.level == level for p in problems) for level in (1, 2, 3, 4)}
    assert counts == {1: 100, 2: 100, 3: 50, 4: 20}
    assert [(p.level, p.problem_id) for p in problems] == sorted((p.level, p.problem_id) for p in problems)
    first = problems[0]
    assert (first.key, first.name) == ("L1/1", "1_Square_matrix_multiplication_")
    assert first.code == kernelbench_rows[0]["code"]
    assert first.source == f"{kernelbench_path}:1"


def test_select_levels_and_ids(kernelbench_path):
    problems = load_problems(kernelbench_path, levels=[2, 1], ids=[3, 19])
    assert [p.key for p in problems] == ["L1/3", "L1/19", "L2/3", "L2/19"]


def test_missing_level_or_id_is_an_error_not_an_empty_list(kernelbench_path):
    with pytest.raises(ValueError, match=r"level\(s\) \[7\]"):
        load_problems(kernelbench_path, levels=[1, 7])
    with pytest.raises(ValueError, match=r"id\(s\) \[51\]"):
        load_problems(kernelbench_path, levels=[4], ids=[1, 51])


def test_folder_layout_matches_the_jsonl(kernelbench_path, tmp_path):
    reference = load_problems(kernelbench_path, levels=[1, 2], ids=[1, 2])
    for problem in reference:
        folder = tmp_path / f"level{problem.level}"
        folder.mkdir(exist_ok=True)
        (folder / f"{problem.name}.py").write_text(problem.code)
    (tmp_path / "level1" / "__init__.py").write_text("")
    (tmp_path / "README.md").write_text("not a level")
    loaded = load_problems(tmp_path)
    assert [(p.key, p.name, p.code) for p in loaded] == [(p.key, p.name, p.code) for p in reference]
    assert loaded[0].source == str(tmp_path / "level1" / "1_Square_matrix_multiplication_.py")


@pytest.mark.parametrize(
    "files, message",
    [
        ({}, "no level<N>/ folders"),
        ({"level1/square.py": MINIMAL}, "must look like <id>_<Name>.py"),
        ({"level1/1_A.py": MINIMAL.replace("def get_inputs", "def inputs")}, "does not define get_inputs"),
        ({"level1/1_A.py": "def broken(:\n"}, "does not parse"),
    ],
)
def test_bad_folders(tmp_path, files, message):
    for name, code in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(code)
    with pytest.raises(ValueError, match=message):
        load_problems(tmp_path)


@pytest.mark.parametrize(
    "line, message",
    [
        ("{not json", r"kb.jsonl:2: not valid JSON"),
        ("[1, 2]", r"kb.jsonl:2: expected a JSON object"),
        (json.dumps({"level": 1, "problem_id": 2, "code": MINIMAL}), r"kb.jsonl:2: missing field\(s\) name"),
        (json.dumps({"level": 0, "problem_id": 2, "name": "2_B", "code": MINIMAL}), "level must be a positive int"),
        (json.dumps({"level": 1, "problem_id": "2", "name": "2_B", "code": MINIMAL}), "problem_id must be a positive int"),
        (json.dumps({"level": 1, "problem_id": 2, "name": "2_B", "code": "  "}), "has no code"),
        (json.dumps({"level": 1, "problem_id": 1, "name": "1_A_again", "code": MINIMAL}), "duplicate problem L1/1"),
    ],
)
def test_bad_jsonl_rows_name_the_line(tmp_path, line, message):
    path = tmp_path / "kb.jsonl"
    path.write_text(json.dumps({"level": 1, "problem_id": 1, "name": "1_A", "code": MINIMAL}) + "\n" + line + "\n")
    with pytest.raises(ValueError, match=message):
        load_problems(path)


def test_missing_source(tmp_path):
    with pytest.raises(FileNotFoundError, match="absent.jsonl"):
        load_problems(tmp_path / "absent.jsonl")


def test_problem_is_checked_when_built_directly():
    assert Problem(3, 7, "7_X", MINIMAL).key == "L3/7"
    with pytest.raises(ValueError, match="does not define Model"):
        Problem(1, 1, "1_X", MINIMAL.replace("class Model", "class Other"))
