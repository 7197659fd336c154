"""`eval` against an OpenAI-compatible endpoint: the runner's run folder and metrics, with the endpoint's
requests, retries, keys and model names handled as jaxrl.evaluation.endpoint says."""

from __future__ import annotations

import json

import httpx
import pytest

from jaxrl.config import ConfigError, load_config
from jaxrl.data.task_source import TaskSpec
from jaxrl.evaluation.endpoint import EndpointError, EndpointGenerator
from jaxrl.evaluation.runner import run_eval
from jaxrl.sampling.api import Completion, SamplingParams
from jaxrl.serving.app import create_app
from jaxrl.serving.batcher import Batcher
from jaxrl.serving.server import BackgroundServer
from sandbox_service.results import EvalResult, Status

PROBLEMS = [TaskSpec("add", "class Model: 'torch.add'", name="add"), TaskSpec("mul", "class Model: 'torch.mul'",
                                                                            name="mul")]


class KernelWriter:
    """A served model that answers the `add` problem with a GOOD kernel, the others with a bad one."""

    name = "kernel-writer"

    def render(self, messages):
        return "\n".join(m["content"] for m in messages)

    def count_tokens(self, text):
        return len(text.split())

    def generate(self, prompts, params: SamplingParams):
        return [[Completion("GOOD kernel" if "torch.add" in p else "bad kernel", (), (), "stop", token_count=2)]
                for p in prompts]


class FakeSandbox:
    """A completion with GOOD in it is correct."""

    def evaluate(self, reference, candidate, options=None, *, input_sets=(), timeout_s=None, request_id=""):
        good = "GOOD" in candidate
        return EvalResult(Status.OK if good else Status.INCORRECT, correct=good, valid=True, compiled=True)


def test_eval_through_an_endpoint_writes_the_same_run_folder(tmp_path):
    model = KernelWriter()
    batcher = Batcher(model, window_s=0.05)
    server = BackgroundServer(create_app(model, batcher, default_max_tokens=64))
    try:
        config = load_config(None, [f"model.endpoint={server.url}", "sampling.num_samples=2", "eval.k=[1,2]",
                                    f"run.output_root={tmp_path}", "run.name=endpoint", "sampling.max_new_tokens=8"])
        with EndpointGenerator(config.model) as generator:
            assert generator.model_name == "kernel-writer"  # the endpoint's only model
            run = run_eval(config, generator, client=FakeSandbox(), progress=False, problems=PROBLEMS)
    finally:
        server.stop()
        batcher.close()
    samples = [json.loads(line) for line in run.samples_path.read_text().splitlines()]
    assert sorted((s["problem"], s["sample"]) for s in samples) == [("add", 0), ("add", 1), ("mul", 0), ("mul", 1)]
    assert all(s["num_tokens"] == 2 and s["finish_reason"] == "stop" for s in samples)
    overall = run.metrics.group("all")
    assert overall.rate("correct") == pytest.approx(0.5) and overall.rate("correct", 2) == pytest.approx(0.5)
    assert {s["problem"]: s["status"] for s in samples} == {"add": "ok", "mul": "incorrect"}
    assert json.loads(run.metrics_path.read_text())["timing"]["generated_tokens"] == 8
    assert f"at {server.url} (chat API)" in run.report_path.read_text()


class Scripted:
    """An httpx transport answering from a list of (status, body) and recording the requests."""

    def __init__(self, *answers, models=("m",)):
        self.answers = list(answers)
        self.models = models
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/models"):
            return httpx.Response(200, json={"data": [{"id": m} for m in self.models]})
        self.requests.append(request)
        status, body = self.answers.pop(0) if self.answers else (200, _answer("ok"))
        return httpx.Response(status, json=body, headers={"retry-after": "0"} if status == 429 else {})


def _answer(text: str, finish: str = "stop") -> dict:
    return {"choices": [{"message": {"content": text}, "text": text, "finish_reason": finish}],
            "usage": {"completion_tokens": 3}}


def _generator(transport: Scripted, *overrides: str, tokenizer=None) -> EndpointGenerator:
    section = load_config(None, ["model.endpoint=http://api.test/v1", "model.max_concurrency=1",
                                 *overrides]).model
    return EndpointGenerator(section, tokenizer=tokenizer, transport=httpx.MockTransport(transport),
                             initial_backoff_s=0.001)


def test_transient_failures_are_retried_and_each_sample_has_its_own_seed():
    transport = Scripted((503, {}), (429, {}), (200, _answer("first", "length")), (200, _answer("second")))
    generator = _generator(transport)
    (samples,) = generator.generate([generator.render([{"role": "user", "content": "hi"}])],
                                    SamplingParams(temperature=0.7, max_new_tokens=9, num_samples=2, seed=5,
                                                   stop_strings=("END",)))
    assert [(c.text, c.finish_reason, c.num_tokens) for c in samples] == [("first", "length", 3), ("second", "stop", 3)]
    bodies = [json.loads(r.content) for r in transport.requests]
    assert [b["seed"] for b in bodies] == [5, 5, 5, 6] and all(r.url.path == "/v1/chat/completions"
                                                               for r in transport.requests)
    assert bodies[0]["messages"] == [{"role": "user", "content": "hi"}]
    assert (bodies[0]["model"], bodies[0]["max_tokens"], bodies[0]["stop"], bodies[0]["n"]) == ("m", 9, ["END"], 1)
    assert "top_k" not in bodies[0]  # sent only when set


def test_a_refused_request_fails_at_once_and_retries_have_a_limit():
    transport = Scripted((401, {"error": {"message": "bad key"}}))
    with pytest.raises(EndpointError, match="refused the request: HTTP 401"):
        _generator(transport).generate(["x"], SamplingParams())
    assert len(transport.requests) == 1
    transport = Scripted(*[(500, {})] * 3)
    with pytest.raises(EndpointError, match="failed 3 times"):
        _generator(transport, "model.max_retries=2").generate(["x"], SamplingParams())


def test_the_api_key_comes_from_the_named_variable(monkeypatch):
    transport = Scripted()
    monkeypatch.setenv("MY_KEY", "sk-test")
    _generator(transport, "model.api_key_env=MY_KEY").generate(["x"], SamplingParams())
    assert transport.requests[0].headers["authorization"] == "Bearer sk-test"
    monkeypatch.delenv("MY_KEY")
    with pytest.raises(ConfigError, match=r"\$MY_KEY is not set"):
        _generator(transport, "model.api_key_env=MY_KEY")


def test_model_name_and_completion_api_choices():
    with pytest.raises(ConfigError, match="serves 2 models"):
        _generator(Scripted(models=("a", "b")))
    assert _generator(Scripted(models=("a", "b")), "model.name=b").model_name == "b"
    with pytest.raises(ConfigError, match="set model.tokenizer"):
        _generator(Scripted(), "model.api=completion")

    class Template:
        chat_template = "t"

        def apply_chat_template(self, messages, tokenize, add_generation_prompt):
            return "<|user|>" + messages[0]["content"] + "<|assistant|>"

    transport = Scripted()
    generator = _generator(transport, "model.api=completion", tokenizer=Template())
    generator.generate([generator.render([{"role": "user", "content": "hi"}])], SamplingParams())
    assert transport.requests[0].url.path == "/v1/completions"
    assert json.loads(transport.requests[0].content)["prompt"] == "<|user|>hi<|assistant|>"
