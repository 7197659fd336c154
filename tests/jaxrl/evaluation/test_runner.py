"""The evaluation pipeline: scripted completions -> sandbox -> samples.jsonl, metrics.json, report.md.

One test goes through the real embedded sandbox (Triton interpreter) with a known-correct kernel,
a wrong kernel and answers without code, so every path from completion to metric is exercised.
The others use an in-process fake client to check the plumbing quickly.
"""

from __future__ import annotations

import dataclasses
import json
import threading
import time
from collections.abc import Sequence

import pytest

from jaxrl.config import load_config
from jaxrl.evaluation.run_dir import create_run_dir
from jaxrl.evaluation.runner import eval_options, run_eval
from jaxrl.sampling.api import Completion, SamplingParams
from jaxrl.sampling.sampler import params_from_section
from sandbox_service.options import CandidateFormat, Policy
from sandbox_service.results import EvalResult, Status

from scripted_completions import NO_CODE, RELU_CORRECT, RELU_WRONG

SCRIPT = {
    "torch.relu": [RELU_CORRECT, RELU_WRONG, NO_CODE],
    "torch.sigmoid": [NO_CODE, "", NO_CODE],
}


class ScriptedGenerator:
    """Answers each prompt with fixed completions, chosen by the operator its reference uses."""

    def __init__(self, script: dict[str, list[str]], on_generate=None):
        self.script = script
        self.calls: list[tuple[list[str], SamplingParams]] = []
        self.on_generate = on_generate

    def render(self, messages: list[dict[str, str]]) -> str:
        return "\n".join(f"<{m['role']}>{m['content']}" for m in messages)

    def generate(self, prompts: Sequence[str], params: SamplingParams) -> list[list[Completion]]:
        if self.on_generate is not None:
            self.on_generate(len(self.calls))
        self.calls.append((list(prompts), params))
        out = []
        for prompt in prompts:
            (texts,) = [texts for op, texts in self.script.items() if op in prompt]
            assert len(texts) == params.num_samples
            out.append([_completion(t) for t in texts])
        return out


def _completion(text: str) -> Completion:
    tokens = tuple(range(len(text.split())))
    return Completion(text, tokens, tuple(-0.5 for _ in tokens), "stop")


def _config(kernelbench_path, tmp_path, *overrides: str):
    return load_config(None, [
        f"eval.dataset={kernelbench_path}", "eval.levels=[1]", "eval.ids=[19,21]", "eval.cpu_sized=true",
        "eval.k=[1,2,3]", "sampling.num_samples=3", "sampling.batch_size=3", "sampling.seed=7",
        "sandbox.backend=interpreter", "sandbox.workers=2", "sandbox.trials=2", "sandbox.timeout_s=120",
        "sandbox.max_concurrency=3", f"run.output_root={tmp_path}", "run.name=eval-test", *overrides,
    ])


def _read_samples(run) -> list[dict]:
    return [json.loads(line) for line in run.samples_path.read_text().splitlines()]


@pytest.mark.slow
def test_end_to_end_through_the_embedded_sandbox(kernelbench_path, tmp_path):
    config = _config(kernelbench_path, tmp_path)
    run = run_eval(config, ScriptedGenerator(SCRIPT), progress=False)

    assert run.run_dir == tmp_path / "eval-test"
    assert (run.problems, run.samples) == (2, 6)
    samples = {(r["problem"], r["sample"]): r for r in _read_samples(run)}
    assert sorted(samples) == [("L1/19", 0), ("L1/19", 1), ("L1/19", 2), ("L1/21", 0), ("L1/21", 1), ("L1/21", 2)]
    statuses = {key: r["status"] for key, r in samples.items()}
    assert statuses == {
        ("L1/19", 0): "ok",
        ("L1/19", 1): "incorrect",
        ("L1/19", 2): "format_error",
        ("L1/21", 0): "format_error",
        ("L1/21", 1): "format_error",
        ("L1/21", 2): "format_error",
    }
    ok = samples[("L1/19", 0)]
    assert ok["correct"] and ok["valid"] and ok["compiled"] and ok["trials_passed"] == ok["trials"] == 2
    assert ok["backend"] == "interpreter" and ok["speedup"] is None  # the interpreter is never timed
    assert ok["completion"] == RELU_CORRECT and ok["level"] == 1 and ok["problem_id"] == 19
    assert ok["name"] == "19_ReLU" and ok["finish_reason"] == "stop" and ok["num_tokens"] == len(RELU_CORRECT.split())
    wrong = samples[("L1/19", 1)]
    assert wrong["valid"] and not wrong["correct"] and wrong["trials_passed"] < wrong["trials"]
    assert samples[("L1/21", 1)]["violations"][0]["rule"] == "empty-completion"

    metrics = json.loads(run.metrics_path.read_text())
    overall = next(g for g in metrics["groups"] if g["name"] == "all")
    assert [g["name"] for g in metrics["groups"]] == ["level 1", "all"]
    assert (overall["problems"], overall["samples"], overall["infra_errors"]) == (2, 6, 0)
    # ReLU: 1 of 3 correct, Sigmoid: 0 of 3. pass@1 = (1/3 + 0) / 2; pass@2 = (1 - C(2,2)/C(3,2)) / 2.
    assert overall["rates"]["1"]["correct"] == pytest.approx(1 / 6)
    assert overall["rates"]["2"]["correct"] == pytest.approx(1 / 3)
    assert overall["rates"]["3"]["correct"] == pytest.approx(1 / 2)
    assert overall["rates"]["1"]["valid"] == pytest.approx(1 / 3)  # the correct and the wrong kernel
    assert overall["rates"]["1"]["fast_1"] is None and overall["mean_speedup"] is None  # nothing timed
    assert run.metrics.group("all").rate("correct", 2) == pytest.approx(1 / 3)
    relu = next(p for p in metrics["per_problem"] if p["problem"] == "L1/19")
    assert relu["statuses"] == {"ok": 1, "incorrect": 1, "format_error": 1}
    assert metrics["timing"]["generated_tokens"] == sum(r["num_tokens"] for r in samples.values())

    report = run.report_path.read_text()
    assert "| all | 2 | 6 |" in report and "16.7%" in report  # the metrics table (correct@1)
    assert "| L1/19 | 19_ReLU | 3 | 1 | 1 | 1 |" in report  # per problem: ok, incorrect, format_error
    assert "`incorrect`" in report and "`format_error`" in report and "no-code-block" in report
    assert load_config(run.run_dir / "config.yaml") == config


class FakeClient:
    """Scores in-process: a completion containing "GOOD" is ok, anything else incorrect."""

    def __init__(self, delay_s: float = 0.0, fail_on: str | None = None):
        self.requests: list[tuple[str, str, object]] = []
        self.input_sets: list[tuple] = []
        self.delay_s = delay_s
        self.fail_on = fail_on
        self._lock = threading.Lock()

    def evaluate(self, reference, candidate, options=None, *, input_sets=(), timeout_s=None, request_id=""):
        time.sleep(self.delay_s)
        if self.fail_on is not None and self.fail_on in candidate:
            raise ConnectionError("the server went away")
        with self._lock:
            self.requests.append((reference, candidate, options))
            self.input_sets.append(tuple(input_sets))
        good = "GOOD" in candidate
        status = Status.OK if good else Status.INCORRECT
        return EvalResult(status, correct=good, valid=True, compiled=True, trials=2, trials_passed=2 if good else 0)


def test_batches_follow_batch_size_and_each_call_gets_its_own_seed(kernelbench_path, tmp_path):
    config = _config(kernelbench_path, tmp_path, "eval.ids=[19,20,21,22]", "sampling.num_samples=2",
                     "sampling.batch_size=5", "eval.k=[1,2]", "sampling.temperature=0.3", "sampling.stop=[END]")
    generator = ScriptedGenerator({"torch.": ["GOOD", "bad"]})
    client = FakeClient()
    run = run_eval(config, generator, client=client, progress=False)
    # 5 sequences per call at 2 samples per prompt: 2 prompts per call.
    assert [len(prompts) for prompts, _ in generator.calls] == [2, 2]
    expected = params_from_section(config.sampling)  # temperature, top_p, ..., with the seed moved on per call
    assert [params for _, params in generator.calls] == [dataclasses.replace(expected, seed=s) for s in (7, 8)]
    assert len(client.requests) == 8
    assert all(opts.candidate_format == CandidateFormat.COMPLETION for _, _, opts in client.requests)
    assert run.metrics.group("all").rate("correct") == pytest.approx(0.5)
    assert run.metrics.group("all").rate("correct", 2) == pytest.approx(1.0)


def test_evaluation_starts_while_generation_continues(kernelbench_path, tmp_path):
    config = _config(kernelbench_path, tmp_path, "eval.ids=[19,20]", "sampling.num_samples=1",
                     "sampling.batch_size=1", "eval.k=[1]")
    seen_before_second_call = []

    def on_generate(call: int) -> None:
        if call == 1:  # the first problem's verdict must arrive without waiting for the second generation
            path = tmp_path / "eval-test" / "samples.jsonl"
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline and not path.read_text():
                time.sleep(0.01)
            seen_before_second_call.append(path.read_text().count("\n"))

    run_eval(config, ScriptedGenerator({"torch.": ["GOOD"]}, on_generate), client=FakeClient(), progress=False)
    assert seen_before_second_call == [1]


def test_a_generation_failure_names_the_problems_and_keeps_what_was_evaluated(kernelbench_path, tmp_path):
    config = _config(kernelbench_path, tmp_path, "eval.ids=[19,20]", "sampling.num_samples=1",
                     "sampling.batch_size=1", "eval.k=[1]")
    samples = tmp_path / "eval-test" / "samples.jsonl"

    def on_generate(call: int) -> None:
        if call == 1:
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline and not samples.read_text():
                time.sleep(0.01)
            raise ValueError("prompt 0 has 5000 tokens, more than max_prompt_tokens=4096")

    with pytest.raises(ValueError, match="generation failed for L1/20: prompt 0 has 5000 tokens"):
        run_eval(config, ScriptedGenerator({"torch.": ["GOOD"]}, on_generate), client=FakeClient(), progress=False)
    (line,) = samples.read_text().splitlines()
    assert json.loads(line)["problem"] == "L1/19" and json.loads(line)["status"] == "ok"
    assert not (tmp_path / "eval-test" / "metrics.json").exists()


def test_a_failed_sandbox_request_is_recorded_as_infra_error(kernelbench_path, tmp_path):
    config = _config(kernelbench_path, tmp_path, "eval.ids=[19]", "sampling.num_samples=2", "eval.k=[1]")
    run = run_eval(config, ScriptedGenerator({"torch.": ["GOOD", "CRASH"]}), client=FakeClient(fail_on="CRASH"),
                   progress=False)
    by_sample = {r["sample"]: r for r in _read_samples(run)}
    assert by_sample[0]["status"] == "ok"
    assert by_sample[1]["status"] == "infra_error" and "the server went away" in by_sample[1]["error"]
    assert run.metrics.group("all").infra_errors == 1


def test_a_generator_returning_the_wrong_number_of_samples_is_an_error(kernelbench_path, tmp_path):
    config = _config(kernelbench_path, tmp_path, "eval.ids=[19]", "sampling.num_samples=2", "eval.k=[1]")

    class Short(ScriptedGenerator):
        def generate(self, prompts, params):
            return [[_completion("GOOD")] for _ in prompts]

    with pytest.raises(RuntimeError, match=r"returned \[1\] completions for 1 prompts x 2 samples"):
        run_eval(config, Short({}), client=FakeClient(), progress=False)


def test_run_folders_are_never_reused(kernelbench_path, tmp_path):
    config = _config(kernelbench_path, tmp_path)
    first = create_run_dir(config, "eval")
    (first / "samples.jsonl").write_text("earlier run\n")
    second = create_run_dir(config, "eval")
    third = create_run_dir(config, "eval")
    assert (first.name, second.name, third.name) == ("eval-test", "eval-test-1", "eval-test-2")
    assert (first / "samples.jsonl").read_text() == "earlier run\n"
    explicit = create_run_dir(_config(kernelbench_path, tmp_path, f"eval.run_dir={tmp_path / 'mine'}"), "eval")
    assert explicit == tmp_path / "mine"
    unnamed = create_run_dir(_config(kernelbench_path, tmp_path, "run.name=null"), "eval")
    assert unnamed.parent == tmp_path and unnamed.name.startswith("eval-20")


def test_the_sandbox_section_maps_onto_eval_options(kernelbench_path, tmp_path):
    options = eval_options(_config(kernelbench_path, tmp_path, "sandbox.policy=relaxed",
                                   "sandbox.timing_runs=30").sandbox)
    assert (options.trials, options.timeout_s, options.policy) == (2, 120.0, Policy.RELAXED)
    assert options.timing_runs == 30  # an RL run's; KernelBench's 100 by default
    assert options.candidate_format == CandidateFormat.COMPLETION


def test_engine_tasks_are_evaluated_with_their_input_sets_and_grouped_by_family(tmp_path):
    from jaxrl.data.task_source import TaskSpec
    from sandbox_service.options import InputSet

    sets = (InputSet("wide", "def get_inputs():\n    return []\n"),)
    tasks = [TaskSpec("relu-1", "torch.relu 1", sets, "relu", "relu", "val", "easy"),
             TaskSpec("relu-2", "torch.relu 2", sets, "relu", "relu", "val", "easy"),
             TaskSpec("tanh-1", "torch.tanh 1", sets, "tanh", "tanh", "heldout", "hard")]
    config = load_config(None, ["sampling.num_samples=2", "sampling.batch_size=2", "eval.k=[1,2]",
                                f"run.output_root={tmp_path}", "run.name=engine"])
    generator = ScriptedGenerator({"torch.relu": ["GOOD", "bad"], "torch.tanh": ["bad", "bad"]})
    client = FakeClient()
    run = run_eval(config, generator, client=client, progress=False, problems=tasks)

    assert client.input_sets == [sets] * 6
    records = _read_samples(run)
    assert {(r["problem"], r["family"], r["split"], r["level"]) for r in records} == {
        ("relu-1", "relu", "val", None), ("relu-2", "relu", "val", None), ("tanh-1", "tanh", "heldout", None)}
    metrics = json.loads(run.metrics_path.read_text())
    assert [g["name"] for g in metrics["groups"]] == ["all"]  # no levels
    by_family = {g["name"]: g for g in metrics["by_family"]["groups"]}
    assert by_family["relu"]["rates"]["1"]["correct"] == 0.5 and by_family["tanh"]["rates"]["1"]["correct"] == 0.0
    assert by_family["all"]["problems"] == 3
    report = run.report_path.read_text()
    assert "## Per family" in report and "| relu | 2 | 4 |" in report and "split all" in report
