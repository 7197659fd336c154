"""The OpenAI-compatible HTTP API (FastAPI) over a `Batcher`: what `python -m jaxrl.main serve` runs.

    GET  /v1/models
    POST /v1/chat/completions   messages rendered by the model's chat template
    POST /v1/completions        prompt: a string or a list of strings, used as is

Both POST routes take temperature, top_p, max_tokens (or max_completion_tokens), n, stop and stream, plus
top_k (an extension vLLM also accepts); other OpenAI fields are accepted and ignored (`seed`: see
jaxrl.serving.batcher). Without max_tokens a request gets the server's default. Errors use OpenAI's
shape, {"error": {"message", "type", "param", "code"}}, with 400 for bad values and 404 for an unknown
model. With stream=true the answer is a server-sent event stream of chunks ending in `data: [DONE]`;
the sampler decodes a whole batch on the device, so each choice's text comes in one chunk when its
batch is done, followed by a chunk with its finish_reason.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import Iterator
from typing import Any, Protocol

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, StreamingResponse
from pydantic import BaseModel, ConfigDict, Field

from jaxrl.data.prompts import Message
from jaxrl.sampling.api import Completion, SamplingParams
from jaxrl.serving.batcher import Batcher

MAX_N = 64


class ServedModel(Protocol):
    """What the API needs besides the batcher: the model's name, its chat template and its tokenizer."""

    name: str

    def render(self, messages: list[Message]) -> str: ...

    def count_tokens(self, text: str) -> int: ...


class ApiError(Exception):
    """An error answered in OpenAI's shape."""

    def __init__(self, status: int, message: str, param: str | None = None, code: str | None = None):
        super().__init__(message)
        self.status, self.message, self.param, self.code = status, message, param, code


class _Sampling(BaseModel):
    model_config = ConfigDict(extra="ignore")

    model: str | None = None
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    max_tokens: int | None = Field(default=None, ge=1)
    max_completion_tokens: int | None = Field(default=None, ge=1)
    n: int = Field(default=1, ge=1, le=MAX_N)
    stop: str | list[str] | None = None
    stream: bool = False


class ChatMessage(BaseModel):
    model_config = ConfigDict(extra="ignore")

    role: str
    content: str | list[dict[str, Any]] | None = None

    def text(self) -> str:
        """The content; a list of parts keeps its text parts (no images here)."""
        if isinstance(self.content, list):
            return "".join(str(p.get("text", "")) for p in self.content if p.get("type") == "text")
        return self.content or ""


class ChatRequest(_Sampling):
    messages: list[ChatMessage] = Field(min_length=1)


class CompletionRequest(_Sampling):
    prompt: str | list[str]


def create_app(model: ServedModel, batcher: Batcher, *, default_max_tokens: int) -> FastAPI:
    """The API for `model`; requests go through `batcher`, which owns the generator."""
    app = FastAPI(title="TritonRL policy server", version="1")

    @app.exception_handler(ApiError)
    async def _api_error(request: Request, exc: ApiError) -> JSONResponse:
        return _error(exc.status, exc.message, exc.param, exc.code)

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        first = exc.errors()[0] if exc.errors() else {}
        param = ".".join(str(p) for p in first.get("loc", ())[1:]) or None
        return _error(400, f"invalid request: {first.get('msg', exc)} ({param})", param, "invalid_value")

    @app.get("/v1/models")
    async def models() -> dict[str, Any]:
        return {"object": "list", "data": [{"id": model.name, "object": "model", "created": 0, "owned_by": "tritonrl"}]}

    @app.post("/v1/chat/completions")
    async def chat(body: ChatRequest):
        params = _params(body, model.name, default_max_tokens)
        try:
            prompt = model.render([{"role": m.role, "content": m.text()} for m in body.messages])
        except (TypeError, ValueError) as exc:
            raise ApiError(400, f"cannot render the messages: {exc}", "messages") from exc
        (completions,) = await _generate(batcher, [prompt], params)
        usage = _usage(model, [prompt], completions)
        reply = _Reply("chatcmpl", "chat.completion", model.name)
        if body.stream:
            return _stream(reply.chat_chunks(completions))
        choices = [{"index": j, "message": {"role": "assistant", "content": c.text}, "finish_reason": c.finish_reason,
                    "logprobs": None} for j, c in enumerate(completions)]
        return reply.body(choices, usage)

    @app.post("/v1/completions")
    async def completions(body: CompletionRequest):
        params = _params(body, model.name, default_max_tokens)
        prompts = [body.prompt] if isinstance(body.prompt, str) else body.prompt
        if not prompts or any(not p for p in prompts):
            raise ApiError(400, "prompt must be a non-empty string or list of non-empty strings", "prompt")
        results = await _generate(batcher, prompts, params)
        flat = [c for per_prompt in results for c in per_prompt]
        usage = _usage(model, prompts, flat)
        reply = _Reply("cmpl", "text_completion", model.name)
        if body.stream:
            return _stream(reply.completion_chunks(flat))
        choices = [{"index": i, "text": c.text, "finish_reason": c.finish_reason, "logprobs": None}
                   for i, c in enumerate(flat)]
        return reply.body(choices, usage)

    return app


def _params(body: _Sampling, name: str, default_max_tokens: int) -> SamplingParams:
    if body.model is not None and body.model != name:
        raise ApiError(404, f"The model `{body.model}` does not exist; this server serves `{name}`", "model",
                       "model_not_found")
    stop = (body.stop,) if isinstance(body.stop, str) else tuple(body.stop or ())
    if any(not s for s in stop):
        raise ApiError(400, "stop strings must not be empty", "stop")
    try:
        return SamplingParams(temperature=body.temperature, top_p=body.top_p, top_k=body.top_k,
                              max_new_tokens=body.max_completion_tokens or body.max_tokens or default_max_tokens,
                              num_samples=body.n, stop_strings=stop)
    except ValueError as exc:
        raise ApiError(400, str(exc), code="invalid_value") from exc


async def _generate(batcher: Batcher, prompts: list[str], params: SamplingParams) -> list[list[Completion]]:
    """Each prompt's n completions; a ValueError of the sampler (e.g. a prompt too long) is the client's 400."""
    futures = [asyncio.wrap_future(batcher.submit(p, params)) for p in prompts]
    try:
        return list(await asyncio.gather(*futures))
    except ValueError as exc:
        raise ApiError(400, str(exc), code="invalid_value") from exc


def _usage(model: ServedModel, prompts: list[str], completions: list[Completion]) -> dict[str, int]:
    prompt_tokens = sum(model.count_tokens(p) for p in prompts)
    completion_tokens = sum(c.num_tokens for c in completions)
    return {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens}


class _Reply:
    """The envelope every answer and chunk of one request shares: id, object, created, model."""

    def __init__(self, prefix: str, kind: str, model: str):
        self.id = f"{prefix}-{uuid.uuid4().hex}"
        self.kind, self.model, self.created = kind, model, int(time.time())

    def body(self, choices: list[dict[str, Any]], usage: dict[str, int] | None = None,
             kind: str | None = None) -> dict[str, Any]:
        out = {"id": self.id, "object": kind or self.kind, "created": self.created, "model": self.model,
               "choices": choices}
        if usage is not None:
            out["usage"] = usage
        return out

    def chat_chunks(self, completions: list[Completion]) -> Iterator[dict[str, Any]]:
        for j, c in enumerate(completions):
            delta = {"role": "assistant", "content": c.text}
            yield self.body([{"index": j, "delta": delta, "finish_reason": None, "logprobs": None}],
                            kind="chat.completion.chunk")
            yield self.body([{"index": j, "delta": {}, "finish_reason": c.finish_reason, "logprobs": None}],
                            kind="chat.completion.chunk")

    def completion_chunks(self, completions: list[Completion]) -> Iterator[dict[str, Any]]:
        for i, c in enumerate(completions):
            yield self.body([{"index": i, "text": c.text, "finish_reason": None, "logprobs": None}])
            yield self.body([{"index": i, "text": "", "finish_reason": c.finish_reason, "logprobs": None}])


def _stream(chunks: Iterator[dict[str, Any]]) -> StreamingResponse:
    def events() -> Iterator[str]:
        for chunk in chunks:
            yield f"data: {json.dumps(chunk, ensure_ascii=False)}\n\n"
        yield "data: [DONE]\n\n"

    return StreamingResponse(events(), media_type="text/event-stream")


def _error(status: int, message: str, param: str | None, code: str | None) -> JSONResponse:
    kind = "invalid_request_error" if status < 500 else "server_error"
    return JSONResponse({"error": {"message": message, "type": kind, "param": param, "code": code}},
                        status_code=status)
