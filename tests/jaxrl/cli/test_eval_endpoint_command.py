"""`python -m jaxrl.main eval model.endpoint=URL`: the eval command's endpoint branch (jaxrl/cli/eval.py) asks an
OpenAI-compatible server for completions instead of loading a model, with the sandbox opened as for any eval."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from jaxrl import main as cli
from jaxrl.sampling.api import Completion, SamplingParams
from jaxrl.serving.app import create_app
from jaxrl.serving.batcher import Batcher
from jaxrl.serving.server import BackgroundServer
from sandbox_service.results import EvalResult, Status

REPO_ROOT = Path(__file__).resolve().parents[3]


class KernelWriter:
    """A served model that always answers with a GOOD kernel."""

    name = "kernel-writer"

    def render(self, messages):
        return "\n".join(m["content"] for m in messages)

    def count_tokens(self, text):
        return len(text.split())

    def generate(self, prompts, params: SamplingParams):
        return [[Completion("GOOD kernel", (), (), "stop", token_count=2)] * params.num_samples for _ in prompts]


class FakeSandbox:
    closed = False

    def evaluate(self, reference, candidate, options=None, *, input_sets=(), timeout_s=None, request_id=""):
        good = "GOOD" in candidate
        return EvalResult(Status.OK if good else Status.INCORRECT, correct=good, valid=True, compiled=True)

    def close(self):
        self.closed = True


@pytest.fixture(scope="module")  # started before capsys, whose stream uvicorn's logging must not keep
def server():
    model = KernelWriter()
    batcher = Batcher(model, window_s=0.01)
    background = BackgroundServer(create_app(model, batcher, default_max_tokens=64))
    yield background
    background.stop()
    batcher.close()


@pytest.fixture
def one_problem(tmp_path) -> Path:
    code = (REPO_ROOT / "tests" / "sandbox_service" / "corpus" / "problems" / "relu.py").read_text()
    path = tmp_path / "kernelbench.jsonl"
    path.write_text(json.dumps({"level": 1, "problem_id": 19, "name": "19_ReLU", "code": code}) + "\n")
    return path


def test_eval_with_an_endpoint_loads_no_model_and_writes_the_run_folder(monkeypatch, capsys, tmp_path, server,
                                                                        one_problem):
    import jaxrl.evaluation.runner
    import jaxrl.generators

    def must_not_load(*args, **kwargs):
        raise AssertionError("eval model.endpoint= loaded a model")

    sandbox = FakeSandbox()
    monkeypatch.setattr(jaxrl.generators, "load_generator", must_not_load)
    monkeypatch.setattr(jaxrl.evaluation.runner, "open_client", lambda section: sandbox)
    code = cli.main(["eval", f"model.endpoint={server.url}", f"eval.dataset={one_problem}", "eval.ids=[19]",
                     "eval.cpu_sized=false", "sampling.num_samples=2", "eval.k=[1,2]", "model.max_concurrency=16",
                     f"run.output_root={tmp_path}", "run.name=through-endpoint", "--no-progress"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "run folder" in out and sandbox.closed
    run_dir = tmp_path / "through-endpoint"
    samples = [json.loads(line) for line in (run_dir / "samples.jsonl").read_text().splitlines()]
    assert len(samples) == 2 and all(s["status"] == "ok" for s in samples)
    saved = yaml.safe_load((run_dir / "config.yaml").read_text())
    assert saved["model"]["name"] == "kernel-writer"  # the endpoint's only model, resolved
    assert saved["sampling"]["batch_size"] == 16  # raised to model.max_concurrency


def test_an_endpoint_that_does_not_answer_exits_2_in_one_line(monkeypatch, capsys, one_problem):
    import jaxrl.evaluation.runner

    monkeypatch.setattr(jaxrl.evaluation.runner, "open_client", lambda section: FakeSandbox())
    code = cli.main(["eval", "model.endpoint=http://127.0.0.1:9/v1", "model.timeout_s=2", f"eval.dataset={one_problem}",
                     "eval.ids=[19]", "eval.cpu_sized=false", "--no-progress"])
    err = capsys.readouterr().err
    assert code == 2
    assert "cannot list its models" in err and len(err.strip().splitlines()) == 1


def test_the_completion_api_needs_a_tokenizer_before_anything_is_asked(monkeypatch, capsys, one_problem):
    import jaxrl.evaluation.runner

    monkeypatch.setattr(jaxrl.evaluation.runner, "open_client", lambda section: FakeSandbox())
    code = cli.main(["eval", "model.endpoint=http://127.0.0.1:9/v1", "model.api=completion",
                     f"eval.dataset={one_problem}", "eval.ids=[19]", "eval.cpu_sized=false", "--no-progress"])
    assert code == 2
    assert "set model.tokenizer" in capsys.readouterr().err
