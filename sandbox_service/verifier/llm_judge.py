"""Optional layer: an LLM reviews the candidate's source for hacks that tests cannot see.

TritonRL pairs its rule-based checks with an LLM judge that flags delegation to PyTorch, hard-coded
outputs and omitted math. This module is that judge behind a small interface, with one
implementation for any OpenAI-compatible chat endpoint (vLLM, SGLang, llama.cpp, hosted APIs), using
only the standard library. It is off unless configured and runs in the trusted parent on text only.

A judge can be down, slow or confused, and the candidate text it reads may try to talk it into a
verdict. So: the candidate is fenced with a random token and declared untrusted in the prompt
(`judge_prompt.md`); the answer is parsed strictly; and any failure yields a verdict with `error`
set and no findings. A broken judge never marks a kernel as cheat and `review` never raises.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import re
import secrets
import time
import urllib.error
import urllib.parse
import urllib.request
from http.client import HTTPException
from pathlib import Path
from typing import Any, Protocol

from sandbox_service.options import Policy
from sandbox_service.results import Outcome, Violation, truncate

log = logging.getLogger(__name__)

LAYER = "judge"
# The rule ids a judge may report; judge_prompt.md describes each to the model under the same id.
RULES = {
    "judge-delegation": "the main computation is done by PyTorch or another library, not by Triton",
    "judge-hardcoded": "outputs or intermediates are hard-coded or precomputed, not computed from the inputs",
    "judge-omitted-math": "part of the reference's computation is skipped",
    "judge-other": "another way to pass the tests without doing the computation",
}
VERDICTS = ("pass", "cheat")
PROMPT_PATH = Path(__file__).with_name("judge_prompt.md")

_SECTIONS = ("System message", "User message", "Policy: strict", "Policy: relaxed")
_PLACEHOLDER = re.compile(r"\{\{([A-Z]+)\}\}")
# The one wrapping an answer may have: a ```json (or bare ```) fence around the whole object.
_ANSWER_FENCE = re.compile(r"\A```(?:json)?[ \t]*\n(?P<body>.*)\n[ \t]*```\Z", re.S)
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_MAX_RESPONSE_BYTES = 1 << 20
_RAW_LIMIT = 2000
_EXPLANATION_LIMIT = 500


@dataclasses.dataclass(frozen=True)
class JudgeVerdict:
    """What the judge concluded. `error` set means it could not conclude: never a cheat then."""

    cheat: bool
    findings: list[Violation] = dataclasses.field(default_factory=list)
    raw: str = ""  # the judge's answer (or the endpoint's error body), truncated, for debugging
    error: str = ""

    def __post_init__(self) -> None:
        if self.error and (self.cheat or self.findings):
            raise ValueError("a judge verdict with an error has no cheat and no findings")
        if self.cheat != bool(self.findings):
            raise ValueError("a judge verdict is cheat exactly when it has findings")
        if any(f.layer != LAYER or f.rule not in RULES for f in self.findings):
            raise ValueError(f"judge findings must have layer {LAYER!r} and a rule from RULES")

    @classmethod
    def failed(cls, error: str, raw: str = "") -> JudgeVerdict:
        return cls(cheat=False, raw=truncate(raw, _RAW_LIMIT), error=truncate(error, 1000))

    @property
    def outcome(self) -> Outcome:
        """The `judge` layer's outcome: error (no conclusion), failed (cheat) or passed."""
        if self.error:
            return Outcome.ERROR
        return Outcome.FAILED if self.cheat else Outcome.PASSED

    @property
    def detail(self) -> str:
        return self.error or "; ".join(f.rule for f in self.findings)


class Judge(Protocol):
    """Anything that can review a candidate against its reference. Must not raise.

    `timeout_s` bounds one review; the evaluation waits that long (plus a margin) for the verdict.
    """

    timeout_s: float

    def review(self, reference_source: str, candidate_code: str, policy: Policy = Policy.STRICT) -> JudgeVerdict: ...


@dataclasses.dataclass(frozen=True)
class JudgeConfig:
    """Where the judge lives. The API key is never part of a config: only the name of its variable.

    url: the base URL as the OpenAI SDK takes it (`http://host:8000/v1`); a bare host
    (`http://host:8000`) gets `/v1` added; a URL already ending in `/chat/completions` is used as is.
    api_key_env: name of the environment variable holding the key (None: send no Authorization).
    timeout_s: bound on one request, connection to last byte.
    max_input_chars: the reference and the candidate are each cut to this (head and tail kept).
    """

    url: str
    model: str
    api_key_env: str | None = None
    timeout_s: float = 60.0
    max_tokens: int = 1024
    temperature: float = 0.0
    max_input_chars: int = 60_000

    def __post_init__(self) -> None:
        problems = []
        parts = urllib.parse.urlsplit(self.url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            problems.append(f"url must be an http or https URL with a host, got {self.url!r}")
        if parts.username or parts.password:
            problems.append("url must not hold credentials: put the key in the variable named by api_key_env")
        if parts.query or parts.fragment:
            problems.append("url must not have a query or a fragment")
        if not isinstance(self.model, str) or not self.model.strip():
            problems.append("model must be a non-empty model name")
        if self.api_key_env is not None and not _ENV_NAME.fullmatch(self.api_key_env):
            problems.append(
                f"api_key_env must be the NAME of an environment variable holding the key (letters, digits, _), "
                f"got a value of {len(self.api_key_env)} characters"
            )
        if not 0 < self.timeout_s <= 600:
            problems.append(f"timeout_s must be in (0, 600], got {self.timeout_s}")
        if not 1 <= self.max_tokens <= 32768:
            problems.append(f"max_tokens must be in [1, 32768], got {self.max_tokens}")
        if not 0 <= self.temperature <= 2:
            problems.append(f"temperature must be in [0, 2], got {self.temperature}")
        if self.max_input_chars < 1000:
            problems.append(f"max_input_chars must be >= 1000, got {self.max_input_chars}")
        if problems:
            raise ValueError("invalid JudgeConfig: " + "; ".join(problems))

    @property
    def endpoint(self) -> str:
        parts = urllib.parse.urlsplit(self.url)
        path = parts.path.rstrip("/")
        if not path.endswith("/chat/completions"):
            path = (path or "/v1") + "/chat/completions"
        return urllib.parse.urlunsplit((parts.scheme, parts.netloc, path, "", ""))


@dataclasses.dataclass(frozen=True)
class JudgePrompt:
    """The two chat messages of judge_prompt.md, with placeholders, and the text of each policy."""

    system: str
    user: str
    policies: dict[Policy, str]

    @classmethod
    def load(cls, path: Path = PROMPT_PATH) -> JudgePrompt:
        sections: dict[str, list[str]] = {}
        current: list[str] | None = None
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.startswith("## "):
                name = line[3:].strip()
                if name in sections or name not in _SECTIONS:
                    raise ValueError(f"{path}: unexpected or repeated section {name!r} (expected {list(_SECTIONS)})")
                current = sections[name] = []
            elif current is not None:
                current.append(line)
        missing = [name for name in _SECTIONS if name not in sections]
        if missing:
            raise ValueError(f"{path}: missing sections {missing}")
        text = {name: "\n".join(lines).strip() for name, lines in sections.items()}
        _check_placeholders(path, "System message", text["System message"], once=(), allowed={"FENCE"})
        _check_placeholders(
            path, "User message", text["User message"],
            once=("POLICY", "REFERENCE", "CANDIDATE"), allowed={"FENCE", "POLICY", "REFERENCE", "CANDIDATE"},
        )
        policies = {policy: text[f"Policy: {policy.value}"] for policy in Policy}
        for policy, policy_text in policies.items():
            _check_placeholders(path, f"Policy: {policy.value}", policy_text, once=(), allowed=set())
        return cls(text["System message"], text["User message"], policies)

    def messages(self, reference: str, candidate: str, policy: Policy, fence: str) -> list[dict[str, str]]:
        """Chat messages for one review. Substitution is one pass: inserted text is never rescanned."""
        values = {"FENCE": fence, "POLICY": self.policies[Policy(policy)], "REFERENCE": reference,
                  "CANDIDATE": candidate}

        def fill(template: str) -> str:
            return _PLACEHOLDER.sub(lambda m: values[m.group(1)], template)

        return [{"role": "system", "content": fill(self.system)}, {"role": "user", "content": fill(self.user)}]


def _check_placeholders(path: Path, section: str, text: str, once: tuple[str, ...], allowed: set[str]) -> None:
    found = _PLACEHOLDER.findall(text)
    unknown = sorted(set(found) - allowed)
    wrong = [name for name in once if found.count(name) != 1]
    if unknown or wrong:
        raise ValueError(f"{path}: section {section!r}: unknown placeholders {unknown}, not exactly once: {wrong}")


class _Unparseable(ValueError):
    pass


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    keys = [key for key, _ in pairs]
    if len(set(keys)) != len(keys):
        raise _Unparseable(f"duplicate keys in {keys}")
    return dict(pairs)


def parse_answer(content: str) -> JudgeVerdict:
    """The verdict in an assistant message, read strictly; anything off is an error verdict.

    Accepted: exactly one JSON object, optionally inside a single ```json fence, with the keys
    `verdict` ("pass" or "cheat") and `findings` (a list of {"rule": <an id of RULES>, "explanation":
    <non-empty text>}), no other keys, no duplicate keys, and findings empty exactly for "pass".
    """
    raw = truncate(content, _RAW_LIMIT)
    text = content.strip()
    fenced = _ANSWER_FENCE.match(text)
    if fenced:
        text = fenced.group("body")
    try:
        data = json.loads(text, object_pairs_hook=_unique_keys)
        findings = _read_answer(data)
    except (ValueError, RecursionError) as exc:  # json.JSONDecodeError and _Unparseable are ValueErrors
        return JudgeVerdict.failed(f"unparseable judge answer: {exc}", raw)
    return JudgeVerdict(cheat=bool(findings), findings=findings, raw=raw)


def _read_answer(data: Any) -> list[Violation]:
    if not isinstance(data, dict) or set(data) != {"verdict", "findings"}:
        found = sorted(data) if isinstance(data, dict) else type(data).__name__
        raise _Unparseable(f"expected an object with exactly the keys verdict and findings, got {found}")
    verdict, findings = data["verdict"], data["findings"]
    if verdict not in VERDICTS:
        raise _Unparseable(f"verdict must be one of {list(VERDICTS)}, got {verdict!r}")
    if not isinstance(findings, list):
        raise _Unparseable(f"findings must be a list, got {type(findings).__name__}")
    violations = []
    for finding in findings:
        if not isinstance(finding, dict) or set(finding) != {"rule", "explanation"}:
            raise _Unparseable(f"each finding must be an object with exactly rule and explanation: {finding!r:.200}")
        rule, explanation = finding["rule"], finding["explanation"]
        if not isinstance(rule, str) or rule not in RULES:
            raise _Unparseable(f"unknown rule {rule!r:.100} (allowed: {sorted(RULES)})")
        if not isinstance(explanation, str) or not explanation.strip():
            raise _Unparseable(f"the explanation of {rule} must be non-empty text")
        violations.append(Violation(LAYER, rule, truncate(explanation.strip(), _EXPLANATION_LIMIT)))
    if (verdict == "cheat") != bool(violations):
        raise _Unparseable(f"verdict {verdict!r} with {len(violations)} findings (cheat needs findings, pass none)")
    return violations


class _Failure(Exception):
    """The endpoint gave no usable assistant message."""

    def __init__(self, error: str, raw: str = ""):
        super().__init__(error)
        self.raw = raw


class _NoRedirects(urllib.request.HTTPRedirectHandler):
    """A chat endpoint has no reason to redirect; following one would resend the key elsewhere."""

    def redirect_request(self, req, fp, code, msg, headers, newurl):  # noqa: ANN001 - urllib's signature
        return None


class OpenAIChatJudge:
    """The judge on an OpenAI-compatible `/chat/completions` endpoint. Safe to share between threads."""

    def __init__(self, config: JudgeConfig, prompt: JudgePrompt | None = None):
        self.config = config
        self.timeout_s = config.timeout_s
        self.prompt = prompt or JudgePrompt.load()
        self._api_key = ""
        if config.api_key_env is not None:
            self._api_key = os.environ.get(config.api_key_env, "")
            if not self._api_key:
                raise ValueError(f"the environment variable {config.api_key_env} (api_key_env) is not set or empty")
        self._opener = urllib.request.build_opener(_NoRedirects())

    def review(self, reference_source: str, candidate_code: str, policy: Policy = Policy.STRICT) -> JudgeVerdict:
        limit = self.config.max_input_chars
        messages = self.prompt.messages(
            truncate(reference_source, limit), truncate(candidate_code, limit), Policy(policy), secrets.token_hex(8)
        )
        try:
            verdict = parse_answer(self._complete(messages))
        except _Failure as exc:
            verdict = JudgeVerdict.failed(str(exc), exc.raw)
        except Exception as exc:  # noqa: BLE001 - the contract: a judge fault is reported, never raised
            log.exception("LLM judge failed")
            verdict = JudgeVerdict.failed(f"judge failed: {type(exc).__name__}: {exc}")
        if verdict.error:
            log.warning("LLM judge gave no verdict: %s", verdict.error)
        return verdict

    def _complete(self, messages: list[dict[str, str]]) -> str:
        """POST the chat request and return the assistant's text."""
        body = {
            "model": self.config.model,
            "messages": messages,
            "temperature": self.config.temperature,
            "max_tokens": self.config.max_tokens,
            "stream": False,
        }
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        request = urllib.request.Request(self.config.endpoint, json.dumps(body).encode(), headers, method="POST")
        timeout = self.config.timeout_s
        deadline = time.monotonic() + timeout
        try:
            with self._opener.open(request, timeout=timeout) as response:
                payload = _read_body(response, deadline)
        except urllib.error.HTTPError as exc:
            detail = _safe_read(exc)
            raise _Failure(f"judge endpoint answered HTTP {exc.code}: {truncate(detail, 300)}", detail) from None
        except urllib.error.URLError as exc:
            if isinstance(exc.reason, TimeoutError):
                raise _Failure(f"judge endpoint timed out after {timeout:g} s") from None
            raise _Failure(f"judge endpoint unreachable: {exc.reason}") from None
        except TimeoutError:
            raise _Failure(f"judge endpoint timed out after {timeout:g} s") from None
        except (OSError, HTTPException) as exc:
            raise _Failure(f"judge endpoint connection failed: {type(exc).__name__}: {exc}") from None
        return _assistant_text(payload)


def _read_body(response: Any, deadline: float) -> bytes:
    """The response body, bounded in size and in total time (each read is also bounded by the socket)."""
    chunks, size = [], 0
    while True:
        if time.monotonic() > deadline:
            raise TimeoutError()
        chunk = response.read1(65536)
        if not chunk:
            return b"".join(chunks)
        size += len(chunk)
        if size > _MAX_RESPONSE_BYTES:
            raise _Failure(f"judge response larger than {_MAX_RESPONSE_BYTES} bytes")
        chunks.append(chunk)


def _safe_read(error: urllib.error.HTTPError) -> str:
    try:
        return error.read(_RAW_LIMIT).decode("utf-8", errors="replace")
    except (OSError, HTTPException):
        return ""


def _assistant_text(payload: bytes) -> str:
    text = payload.decode("utf-8", errors="replace")
    try:
        data = json.loads(text)
        choice = data["choices"][0]
        content = choice["message"]["content"]
    except (ValueError, KeyError, IndexError, TypeError):
        raise _Failure("judge endpoint sent no chat completion (expected choices[0].message.content)", text) from None
    if not isinstance(content, str):
        raise _Failure("judge endpoint sent no text content (a refusal or a tool call?)", text)
    if choice.get("finish_reason") == "length":
        raise _Failure("unparseable judge answer: cut at max_tokens (finish_reason=length)", content)
    return content
