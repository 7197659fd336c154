"""Completions from any OpenAI-compatible endpoint (vLLM, SGLang, a hosted API, `python -m jaxrl.main serve`).

    python -m jaxrl.main eval model.endpoint=http://127.0.0.1:8000/v1 [model.api_key_env=OPENAI_API_KEY]

`EndpointGenerator` is the evaluation runner's `ChatGenerator` for a model behind HTTP, so an endpoint
is scored with the same prompts, sandbox, metrics, pass@k and run folder as the JAX sampler (the `eval`
command's endpoint branch, jaxrl/cli/eval.py, drives it; the completion API's tokenizer comes from jaxrl.policy):

- api `chat`: POST {endpoint}/chat/completions with the prompt's messages (the server applies its own
  chat template); api `completion`: POST {endpoint}/completions with the messages rendered through the
  chat template of `model.tokenizer` (required, since the text must match what the model was trained on).
- One request per sample (n=1), `model.max_concurrency` in flight, each with its own seed
  (sampling.seed + sample index: servers that honour `seed` then give distinct, repeatable samples).
  top_k is sent only when set (an extension vLLM and SGLang accept; OpenAI does not).
- A timeout, a dropped connection, 408, 409, 429 or a 5xx is retried `model.max_retries` times with
  exponential backoff (a Retry-After header is honoured); any other 4xx fails at once with the server's
  message (a wrong key or model name will not fix itself).
- Token counts come from the response's `usage`; completions carry no token ids or logprobs.
"""

from __future__ import annotations

import dataclasses
import os
import random
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx

from jaxrl.config import ConfigError, ModelSection
from jaxrl.data.prompts import Message, render_prompt
from jaxrl.sampling.api import Completion, SamplingParams

RETRY_STATUS = frozenset({408, 409, 429, 500, 502, 503, 504})
_MAX_BACKOFF_S = 30.0


class EndpointError(RuntimeError):
    """A request the endpoint refused, or one that kept failing after every retry."""


@dataclasses.dataclass(frozen=True)
class ChatPrompt:
    """A prompt for the chat API: the messages themselves (the server renders them)."""

    messages: tuple[tuple[str, str], ...]

    def to_json(self) -> list[dict[str, str]]:
        return [{"role": role, "content": content} for role, content in self.messages]


class EndpointGenerator:
    """`render` + `generate` over an OpenAI-compatible HTTP API (see the module docstring)."""

    def __init__(self, section: ModelSection, *, tokenizer: Any = None, transport: httpx.BaseTransport | None = None,
                 initial_backoff_s: float = 0.5):
        if section.endpoint is None:
            raise ConfigError("model.endpoint is not set")
        if section.api == "completion" and tokenizer is None:
            raise ConfigError("model.api=completion renders prompts with a chat template: set model.tokenizer "
                              "(a bundled model's name or a tokenizer folder), or use model.api=chat")
        self.section = section
        self.tokenizer = tokenizer
        self.initial_backoff_s = initial_backoff_s
        headers = {}
        if section.api_key_env is not None:
            key = os.environ.get(section.api_key_env)
            if not key:
                raise ConfigError(f"model.api_key_env={section.api_key_env} but ${section.api_key_env} is not set")
            headers["Authorization"] = f"Bearer {key}"
        self._http = httpx.Client(base_url=section.endpoint.rstrip("/"), headers=headers, timeout=section.timeout_s,
                                  transport=transport, limits=httpx.Limits(max_connections=section.max_concurrency))
        self.model_name = section.name or self._only_model()

    def _only_model(self) -> str:
        """The endpoint's model when it serves exactly one (GET /models); ConfigError otherwise."""
        try:
            response = self._http.get("/models", timeout=min(30.0, self.section.timeout_s))
        except httpx.HTTPError as exc:
            raise ConfigError(f"model.endpoint {self.section.endpoint}: cannot list its models "
                              f"({type(exc).__name__}: {exc}); is the server up?") from exc
        if response.status_code != 200:
            raise ConfigError(f"model.endpoint {self.section.endpoint}: GET /models answered {response.status_code}: "
                              f"{response.text[:300]}; set model.name")
        names = [m.get("id") for m in response.json().get("data", [])]
        if len(names) != 1:
            raise ConfigError(f"model.endpoint {self.section.endpoint} serves {len(names)} models "
                              f"({', '.join(map(str, names[:10]))}); pick one with model.name")
        return str(names[0])

    def render(self, messages: list[Message]) -> ChatPrompt | str:
        if self.section.api == "chat":
            return ChatPrompt(tuple((m["role"], m["content"]) for m in messages))
        return render_prompt(self.tokenizer, messages)

    def generate(self, prompts: Sequence[ChatPrompt | str], params: SamplingParams) -> list[list[Completion]]:
        jobs = [(i, j) for i in range(len(prompts)) for j in range(params.num_samples)]
        with ThreadPoolExecutor(max_workers=min(self.section.max_concurrency, len(jobs) or 1),
                                thread_name_prefix="endpoint") as pool:
            done = list(pool.map(lambda job: self._sample(prompts[job[0]], params, params.seed + job[1]), jobs))
        out: list[list[Completion]] = [[] for _ in prompts]
        for (i, _), completion in zip(jobs, done):
            out[i].append(completion)
        return out

    def _sample(self, prompt: ChatPrompt | str, params: SamplingParams, seed: int) -> Completion:
        body: dict[str, Any] = {"model": self.model_name, "temperature": params.temperature, "top_p": params.top_p,
                                "max_tokens": params.max_new_tokens, "n": 1, "seed": seed}
        if params.top_k:
            body["top_k"] = params.top_k
        if params.stop_strings:
            body["stop"] = list(params.stop_strings)
        if isinstance(prompt, ChatPrompt):
            path, body["messages"] = "/chat/completions", prompt.to_json()
        else:
            path, body["prompt"] = "/completions", prompt
        data = self._post(path, body)
        try:
            choice = data["choices"][0]
            text = choice["message"]["content"] if isinstance(prompt, ChatPrompt) else choice["text"]
        except (KeyError, IndexError, TypeError) as exc:
            raise EndpointError(f"{path}: unexpected answer {str(data)[:300]}") from exc
        tokens = (data.get("usage") or {}).get("completion_tokens")
        finish = "length" if choice.get("finish_reason") == "length" else "stop"
        return Completion(text or "", (), (), finish, token_count=int(tokens) if tokens is not None else None)

    def _post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        """The JSON answer; retries transient failures with exponential backoff, see the module docstring."""
        failure, retry_after = "", None
        for attempt in range(self.section.max_retries + 1):
            if attempt:
                time.sleep(self._backoff(attempt, retry_after))
            try:
                response = self._http.post(path, json=body)
            except httpx.HTTPError as exc:  # timeouts, refused or dropped connections
                failure, retry_after = f"{type(exc).__name__}: {exc}", None
                continue
            if response.status_code == 200:
                return response.json()
            failure, retry_after = f"HTTP {response.status_code}: {response.text[:300]}", response.headers.get("retry-after")
            if response.status_code not in RETRY_STATUS:
                raise EndpointError(f"{self.section.endpoint}{path} refused the request: {failure}")
        raise EndpointError(f"{self.section.endpoint}{path} failed {self.section.max_retries + 1} times; last: {failure}")

    def _backoff(self, attempt: int, retry_after: str | None) -> float:
        """Seconds before attempt `attempt` (>= 1): the server's Retry-After in seconds when it gave one,
        else initial_backoff_s doubled per attempt, with jitter; at most _MAX_BACKOFF_S."""
        if retry_after is not None:
            try:
                return min(_MAX_BACKOFF_S, max(0.0, float(retry_after)))
            except ValueError:  # an HTTP date: fall back to our own schedule
                pass
        return min(_MAX_BACKOFF_S, self.initial_backoff_s * 2 ** (attempt - 1)) * (0.5 + random.random() / 2)

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> EndpointGenerator:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

