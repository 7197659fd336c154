"""`score`: completions produced elsewhere (a JSONL, a KernelBench generations folder) -> the run folder
and metrics `eval` writes."""

from __future__ import annotations

import json

import pytest

from jaxrl.config import ConfigError, load_config
from jaxrl.evaluation.score import run_score
from sandbox_service.options import CandidateFormat
from sandbox_service.results import EvalResult, Status

RELU = "import torch\n\n\nclass Model(torch.nn.Module):\n    def forward(self, x):\n        return torch.relu(x)\n\n\n" \
       "def get_inputs():\n    return [torch.randn(4)]\n\n\ndef get_init_inputs():\n    return []\n"


class FakeSandbox:
    """A candidate holding GOOD is correct; records what it was asked."""

    def __init__(self):
        self.asked = []

    def evaluate(self, reference, candidate, options=None, *, input_sets=(), timeout_s=None, request_id=""):
        self.asked.append((reference, candidate, options, tuple(input_sets)))
        good = "GOOD" in candidate
        return EvalResult(Status.OK if good else Status.INCORRECT, correct=good, valid=True, compiled=True)


@pytest.fixture
def kernelbench(tmp_path):
    """A KernelBench-style folder with one level-1 problem, L1/19."""
    (tmp_path / "kb" / "level1").mkdir(parents=True)
    (tmp_path / "kb" / "level1" / "19_ReLU.py").write_text(RELU)
    return tmp_path / "kb"


def _config(tmp_path, kernelbench, completions, *overrides):
    return load_config(None, [f"score.completions={completions}", f"eval.dataset={kernelbench}",
                              f"run.output_root={tmp_path}", "run.name=scored", *overrides])


def test_a_jsonl_of_kernelbench_and_reference_rows(tmp_path, kernelbench):
    rows = [
        {"level": 1, "problem_id": 19, "completion": "```python\nGOOD\n```"},
        {"problem": {"level": 1, "problem_id": 19}, "completion": "bad"},
        {"problem": "L1/19", "completion": "GOOD again"},
        {"reference": RELU.replace("relu", "sigmoid"), "name": "sig", "completion": "bad",
         "input_sets": [{"name": "big", "source": "def get_inputs():\n    return [torch.randn(64)]\n"}]},
        {"problem": RELU.replace("relu", "tanh"), "completion": "GOOD", "sample": 3},
    ]
    path = tmp_path / "gen.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    sandbox = FakeSandbox()
    run = run_score(_config(tmp_path, kernelbench, path), progress=False, client=sandbox)

    samples = sorted((s["problem"], s["sample"], s["status"]) for s in map(json.loads, run.samples_path.read_text().splitlines()))
    tanh = [s[0] for s in samples if s[0].startswith("ref-")][0]
    assert samples == sorted([("L1/19", 0, "ok"), ("L1/19", 1, "incorrect"), ("L1/19", 2, "ok"),
                              ("sig", 0, "incorrect"), (tanh, 3, "ok")])
    assert all(opts.candidate_format == CandidateFormat.AUTO for _, _, opts, _ in sandbox.asked)  # raw code is read as code
    assert [sets[0].name for ref, _, _, sets in sandbox.asked if "sigmoid" in ref] == ["big"]
    assert run.metrics.ks == (1,)  # the fewest samples of a problem is 1
    assert run.metrics.group("all").rate("correct") == pytest.approx((2 / 3 + 0 + 1) / 3)
    assert f"scored from `{path}`" in run.report_path.read_text()
    assert run.run_dir == tmp_path / "scored"


def test_a_kernelbench_generations_folder(tmp_path, kernelbench):
    runs = tmp_path / "runs" / "my_run"
    runs.mkdir(parents=True)
    for sample, text in enumerate(["GOOD", "bad", "GOOD"]):
        (runs / f"level_1_problem_19_sample_{sample}_kernel.py").write_text(text)
    (runs / "level_1_problem_19_sample_0_response.txt").write_text("ignored")
    run = run_score(_config(tmp_path, kernelbench, runs), progress=False, client=FakeSandbox())
    assert run.metrics.ks == (1, 3)
    assert run.metrics.group("level 1").rate("correct") == pytest.approx(2 / 3)
    assert run.metrics.group("level 1").rate("correct", 3) == 1.0


@pytest.mark.parametrize("rows, message", [
    ([{"completion": "x"}], "name the problem"),
    ([{"level": 1, "problem_id": 99, "completion": "x"}], r"id\(s\) \[99\] not found"),
    ([{"problem": "L1/19", "completion": "x", "sample": 0}, {"problem": "L1/19", "completion": "y", "sample": 0}],
     "a second sample 0"),
    ([{"problem": "L1/19"}], "`completion` must be a string"),
])
def test_bad_rows_are_configuration_errors_that_name_the_line(tmp_path, kernelbench, rows, message):
    path = tmp_path / "bad.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(ConfigError, match=message):
        run_score(_config(tmp_path, kernelbench, path), progress=False, client=FakeSandbox())
