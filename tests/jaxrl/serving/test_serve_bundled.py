"""`serve` with the bundled SmolLM2-135M: the `openai` client gets answers from the real sampler, and
`eval model.endpoint=` evaluates through the server (the issue's target, small max_tokens for the CPU)."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor

import openai
import pytest

from jaxrl.config import load_config
from jaxrl.main import main
from jaxrl.serving.server import BackgroundServer, build


@pytest.fixture(scope="module")
def bundled():
    config = load_config(None, ["mesh.fsdp=1", "sampling.batch_size=8", "sampling.max_new_tokens=8",
                                "serve.batch_window_ms=50"])
    model, batcher, app = build(config)
    server = BackgroundServer(app)
    yield server, batcher
    server.stop()
    batcher.close()


@pytest.mark.slow
def test_openai_client_chats_with_the_bundled_model_and_concurrent_requests_share_a_batch(bundled):
    server, batcher = bundled
    client = openai.OpenAI(base_url=server.url, api_key="unused", max_retries=0)
    assert [m.id for m in client.models.list().data] == ["smollm2-135m"]
    ask = lambda question: client.chat.completions.create(  # noqa: E731
        model="smollm2-135m", messages=[{"role": "user", "content": question}], max_tokens=6, temperature=0)
    calls_before = batcher.stats.calls
    with ThreadPoolExecutor(4) as pool:
        replies = list(pool.map(ask, ["What is the capital of France?"] * 4))
    assert batcher.stats.calls - calls_before < 4  # at least two requests were decoded together
    texts = {r.choices[0].message.content for r in replies}
    assert len(texts) == 1 and "Paris" in texts.pop()  # greedy: the same answer whatever the batch
    assert all(r.usage.completion_tokens == 6 and r.choices[0].finish_reason == "length" for r in replies)


@pytest.mark.slow
def test_eval_through_the_server(bundled, tmp_path, capsys):
    server, _ = bundled
    code = main(["eval", f"model.endpoint={server.url}", "eval.dataset=generated", "eval.ids=null",
                 "eval.num_generated=1", "sampling.num_samples=1", "eval.k=[1]", "sampling.max_new_tokens=16", f"run.output_root={tmp_path}",
                 "run.name=through-serve", "--no-progress"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "run folder" in out and "all" in out
    samples = [json.loads(line) for line in (tmp_path / "through-serve" / "samples.jsonl").read_text().splitlines()]
    assert len(samples) == 1 and all(0 < s["num_tokens"] <= 16 for s in samples)
    assert "`smollm2-135m` at " in (tmp_path / "through-serve" / "report.md").read_text()
