"""Task sources for grpo and eval: data-engine rl_tasks.jsonl files, KernelBench, and generated tasks."""

from __future__ import annotations

import dataclasses
import json
import random
import re
from pathlib import Path

import pytest

from jaxrl.data.engine.api import Engine
from jaxrl.data.engine.tasks import GeneratedTask
from jaxrl.data.kernelbench_source import KernelBenchUnavailable
from jaxrl.data.task_source import ENGINE, GENERATED, KERNELBENCH, TaskSelection, load_tasks, source_kind
from sandbox_service.options import InputSet

FAMILIES = {"relu": "train", "tanh": "val", "gelu": "heldout"}
CODE = "import torch\n\ndef get_inputs():\n    return [torch.randn({n})]\n"


def generate(seed, count, scale="full", families=None):
    rng = random.Random(seed)
    tasks = []
    for i in range(count):
        family, n = rng.choice(sorted(FAMILIES)), rng.randrange(1, 1000)
        sets = (InputSet("big", CODE.format(n=2 * n)),)
        tasks.append(GeneratedTask(f"{family}-{seed}-{i}", family, (family,), False, "easy", "float32", scale,
                                   CODE.format(n=n), sets))
    return tasks


def splitter(heldout, val):
    return lambda task: FAMILIES[task.family]


FAKE_ENGINE = Engine(generate, lambda: [], lambda sources: None, splitter)


def row(task_id, split, n=4):
    return {"task_id": task_id, "family": "relu", "ops": ["relu"], "difficulty": "easy", "split": split,
            "code": CODE.format(n=n), "input_sets": [{"name": "big", "source": CODE.format(n=2 * n)}],
            "validation": {"ref_time_us": None}}


@pytest.fixture
def rl_tasks(tmp_path) -> Path:
    path = tmp_path / "rl_tasks.jsonl"
    rows = [row("a", "train"), row("b", "val", 5), row("c", "heldout", 6), row("d", "train", 7)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_rl_tasks_rows_become_tasks_with_their_input_sets(rl_tasks):
    rows = [json.loads(line) for line in rl_tasks.read_text().splitlines()]
    tasks = load_tasks(TaskSelection(str(rl_tasks)))
    assert source_kind(str(rl_tasks)) == ENGINE
    assert [t.key for t in tasks] == [r["task_id"] for r in rows]
    first = tasks[0]
    assert first.code == rows[0]["code"] and first.family == rows[0]["family"] and first.split == rows[0]["split"]
    assert first.input_sets == tuple(InputSet(**s) for s in rows[0]["input_sets"]) and first.input_sets
    assert first.level is None and first.metadata()["family"] == first.family


def test_the_split_filter_keeps_one_split(rl_tasks):
    every = load_tasks(TaskSelection(str(rl_tasks)))
    for split in ("train", "val", "heldout"):
        kept = load_tasks(TaskSelection(str(rl_tasks), split=split))
        assert kept and {t.split for t in kept} == {split}
        assert [t.key for t in kept] == [t.key for t in every if t.split == split]


def test_per_family_keeps_the_first_tasks_of_each_family_in_file_order(tmp_path):
    families = ["mish", "selu", "mish", "mish", "mish", "selu", "cummax"]
    splits = ["heldout", "heldout", "train", "heldout", "heldout", "heldout", "heldout"]
    rows = [{**row(f"t{i}", split, i + 1), "family": family} for i, (family, split) in enumerate(zip(families, splits))]
    path = tmp_path / "rl_tasks.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    heldout = TaskSelection(str(path), split="heldout", per_family=2)  # the split first, then the first N
    assert [t.key for t in load_tasks(heldout)] == ["t0", "t1", "t3", "t5", "t6"]
    assert [t.key for t in load_tasks(TaskSelection(str(path), per_family=1))] == ["t0", "t1", "t6"]
    assert len(load_tasks(TaskSelection(str(path)))) == len(rows)


def test_per_family_needs_families(kernelbench_path):
    with pytest.raises(ValueError, match="per_family needs tasks with families"):
        load_tasks(TaskSelection(str(kernelbench_path), levels=(1,), per_family=1))


def test_bad_rl_task_rows_are_reported_with_file_and_line(tmp_path):
    good = {"task_id": "a", "code": "def get_inputs(): ...", "split": "train"}
    cases = [
        ({"task_id": "a"}, "code must be a non-empty string"),
        ({**good, "split": "test"}, "split must be one of ['train', 'rl', 'val', 'heldout']"),
        ({**good, "input_sets": [{"name": "x y", "source": "def get_inputs(): ..."}]}, "bad input set"),
    ]
    for row, message in cases:
        path = tmp_path / "tasks.jsonl"
        path.write_text(json.dumps(good | {"task_id": "first"}) + "\n" + json.dumps(row) + "\n")
        with pytest.raises(ValueError, match=rf"tasks.jsonl:2: .*{re.escape(message)}"):
            load_tasks(TaskSelection(str(path)))
    path.write_text(json.dumps(good) + "\n" + json.dumps(good) + "\n")
    with pytest.raises(ValueError, match="duplicate task_id 'a'"):
        load_tasks(TaskSelection(str(path)))
    with pytest.raises(ValueError, match=r"no tasks of split 'val' \(splits present: \['train'\]\)"):
        path.write_text(json.dumps(good) + "\n")
        load_tasks(TaskSelection(str(path), split="val"))


def test_kernelbench_by_path_or_keyword(kernelbench_path, monkeypatch):
    monkeypatch.setenv("KERNELBENCH_JSONL", str(kernelbench_path))
    assert source_kind(str(kernelbench_path)) == KERNELBENCH == source_kind("kernelbench")
    by_path = load_tasks(TaskSelection(str(kernelbench_path), levels=(1,), ids=(19, 21), split="train"))
    by_keyword = load_tasks(TaskSelection("kernelbench", levels=(1,), ids=(19, 21)))
    assert by_path == by_keyword  # problems have no split: the filter leaves them alone
    assert {t.origin for t in by_path} == {f"KernelBench ({kernelbench_path})"}
    assert [(t.key, t.level, t.problem_id, t.input_sets) for t in by_path] == [("L1/19", 1, 19, ()), ("L1/21", 1, 21, ())]
    with pytest.raises(ValueError, match="ids select KernelBench problems"):
        load_tasks(TaskSelection(GENERATED, ids=(1,)), engine=FAKE_ENGINE)


def test_generated_tasks_are_deterministic_and_split(monkeypatch):
    selection = TaskSelection(GENERATED, cpu_sized=True, num_generated=24, generated_seed=5)
    first = load_tasks(selection, engine=FAKE_ENGINE)
    assert first == load_tasks(selection, engine=FAKE_ENGINE) and len(first) == 24
    assert first != load_tasks(TaskSelection(GENERATED, cpu_sized=True, num_generated=24, generated_seed=6),
                               engine=FAKE_ENGINE)
    assert {t.split for t in first} == {"train", "val", "heldout"}
    assert all(t.input_sets and t.family for t in first)
    train = load_tasks(TaskSelection(GENERATED, cpu_sized=True, num_generated=24, generated_seed=5, split="train"),
                       engine=FAKE_ENGINE)
    assert [t.key for t in train] == [t.key for t in first if t.split == "train"]


def test_a_missing_dataset_is_named(tmp_path):
    with pytest.raises(FileNotFoundError, match="no such file or folder"):
        load_tasks(TaskSelection(str(tmp_path / "nope.jsonl")))
    (tmp_path / "odd.jsonl").write_text('{"prompt": "x"}\n')
    with pytest.raises(ValueError, match="neither a data-engine task"):
        load_tasks(TaskSelection(str(tmp_path / "odd.jsonl")))


def test_without_kernelbench_the_generated_fallback_is_used_only_when_asked(isolated, caplog):
    asked = TaskSelection(KERNELBENCH, levels=(1,), ids=(19, 21), cpu_sized=True, num_generated=5, fallback=GENERATED)
    with pytest.raises(KernelBenchUnavailable, match="KernelBench not found"):
        load_tasks(dataclasses.replace(asked, fallback=None), engine=FAKE_ENGINE)
    tasks = load_tasks(asked, engine=FAKE_ENGINE)
    generated = load_tasks(TaskSelection(GENERATED, cpu_sized=True, num_generated=5), engine=FAKE_ENGINE)
    assert tasks == generated
    assert "Falling back to 5 tasks generated" in caplog.text
    # Reports say what was really evaluated.
    assert {t.origin for t in generated} == {"tasks generated by the data engine (seed 0, cpu scale)"}
    assert {t.origin for t in tasks} == {"tasks generated by the data engine (seed 0, cpu scale) in place of "
                                         "KernelBench, which was not found (fallback: generated)"}


def test_an_explicit_kernelbench_path_never_falls_back(isolated, tmp_path):
    with pytest.raises(FileNotFoundError, match="no such file or folder"):
        load_tasks(TaskSelection(str(tmp_path / "kb.jsonl"), fallback=GENERATED), engine=FAKE_ENGINE)


def test_the_embedded_default_evaluates_generated_tasks_in_a_bare_offline_clone(isolated):
    from jaxrl.config import load_config

    tasks = load_tasks(TaskSelection.from_section(load_config("eval_cpu_tiny").eval))
    assert len(tasks) == 3 and all(t.family and t.input_sets and t.level is None for t in tasks)
