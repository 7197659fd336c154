"""The OpenAI-compatible API, spoken to by the `openai` client package, over a scripted generator."""

from __future__ import annotations

from collections.abc import Sequence

import openai
import pytest

from jaxrl.sampling.api import Completion, SamplingParams
from jaxrl.serving.app import create_app
from jaxrl.serving.batcher import Batcher
from jaxrl.serving.server import BackgroundServer


class ScriptedModel:
    """Renders messages as `role: content` lines; answers "<prompt> -> <sample j>", cut to max_new_tokens words."""

    name = "scripted"

    def __init__(self):
        self.calls: list[tuple[list[str], SamplingParams]] = []

    def render(self, messages):
        return "\n".join(f"{m['role']}: {m['content']}" for m in messages)

    def count_tokens(self, text: str) -> int:
        return len(text.split())

    def generate(self, prompts: Sequence[str], params: SamplingParams) -> list[list[Completion]]:
        if any("too long" in p for p in prompts):
            raise ValueError("prompt 0 has 9999 tokens, more than max_prompt_tokens=4096")
        self.calls.append((list(prompts), params))
        out = []
        for i, prompt in enumerate(prompts):
            words = f"{prompt} -> row {i}".split()
            finish = "length" if len(words) > params.max_new_tokens else "stop"
            out.append([Completion(" ".join(words[: params.max_new_tokens]), (), (), finish,
                                   token_count=min(len(words), params.max_new_tokens))])
        return out


@pytest.fixture
def served():
    model = ScriptedModel()
    batcher = Batcher(model, window_s=0.05)
    server = BackgroundServer(create_app(model, batcher, default_max_tokens=50))
    yield model, openai.OpenAI(base_url=server.url, api_key="unused", max_retries=0)
    server.stop()
    batcher.close()


def test_models_lists_the_served_model(served):
    _, client = served
    assert [m.id for m in client.models.list().data] == ["scripted"]


def test_chat_completion_renders_the_messages_and_passes_the_settings(served):
    model, client = served
    reply = client.chat.completions.create(
        model="scripted", messages=[{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}],
        temperature=0.5, top_p=0.9, max_tokens=20, n=2, stop=["END"], extra_body={"top_k": 4})
    assert [c.message.content for c in reply.choices] == ["system: be brief user: hi -> row 0",
                                                          "system: be brief user: hi -> row 1"]
    assert [c.finish_reason for c in reply.choices] == ["stop", "stop"] and reply.model == "scripted"
    assert (reply.usage.prompt_tokens, reply.usage.completion_tokens) == (5, 16)
    (prompts, params), = model.calls
    assert prompts == ["system: be brief\nuser: hi"] * 2
    assert (params.temperature, params.top_p, params.top_k, params.max_new_tokens, params.stop_strings) == (
        0.5, 0.9, 4, 20, ("END",))


def test_completions_take_a_list_of_prompts_and_report_length(served):
    model, client = served
    reply = client.completions.create(model="scripted", prompt=["one two", "three"], max_tokens=3)
    assert [(c.index, c.text, c.finish_reason) for c in reply.choices] == [
        (0, "one two ->", "length"), (1, "three -> row", "length")]
    assert model.calls[0][1].max_new_tokens == 3


def test_without_max_tokens_the_server_default_applies(served):
    model, client = served
    client.completions.create(model="scripted", prompt="x")
    assert model.calls[0][1].max_new_tokens == 50


def test_streaming_sends_the_text_then_the_finish_reason_then_done(served):
    _, client = served
    chunks = list(client.chat.completions.create(model="scripted", messages=[{"role": "user", "content": "hi"}],
                                                 max_tokens=4, stream=True))
    assert "".join(c.choices[0].delta.content or "" for c in chunks) == "user: hi -> row"
    assert [c.choices[0].finish_reason for c in chunks] == [None, "length"]
    texts = list(client.completions.create(model="scripted", prompt="a b", n=2, stream=True))
    assert [(c.choices[0].index, c.choices[0].text, c.choices[0].finish_reason) for c in texts] == [
        (0, "a b -> row 0", None), (0, "", "stop"), (1, "a b -> row 1", None), (1, "", "stop")]


def test_errors_come_in_openais_shape(served):
    _, client = served
    with pytest.raises(openai.NotFoundError) as missing:
        client.completions.create(model="gpt-9", prompt="x")
    assert missing.value.body["code"] == "model_not_found"
    with pytest.raises(openai.BadRequestError, match="temperature"):
        client.completions.create(model="scripted", prompt="x", temperature=-1)
    with pytest.raises(openai.BadRequestError, match="max_tokens"):
        client.completions.create(model="scripted", prompt="x", max_tokens=0)
    with pytest.raises(openai.BadRequestError, match="max_prompt_tokens"):
        client.completions.create(model="scripted", prompt="too long")



def test_a_background_server_leaves_the_process_s_logging_alone():
    """uvicorn's default logging set-up (dictConfig) closes every handler of the process; absl's (installed when
    flax is imported) then closed the stream it held: under pytest a capture file, and the whole run died."""
    import io
    import logging

    class ClosingHandler(logging.StreamHandler):  # closes its stream, as absl's and file handlers do
        def close(self):
            self.stream.close()
            super().close()

    handler = ClosingHandler(io.StringIO())
    logging.getLogger().addHandler(handler)
    model = ScriptedModel()
    batcher = Batcher(model, window_s=0.05)
    try:
        BackgroundServer(create_app(model, batcher, default_max_tokens=8)).stop()
        assert not handler.stream.closed
        assert handler in logging.getLogger().handlers
    finally:
        logging.getLogger().removeHandler(handler)
        batcher.close()
