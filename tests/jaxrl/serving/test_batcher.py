"""Requests that arrive together share one generate call; settings that differ, or a bad prompt, do not
spoil the others."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence

import pytest

from jaxrl.sampling.api import Completion, SamplingParams
from jaxrl.serving.batcher import Batcher


class EchoGenerator:
    """Each row's completion names its prompt and its row in the call; "bad" prompts raise ValueError."""

    def __init__(self, gate: threading.Event | None = None):
        self.calls: list[tuple[list[str], SamplingParams]] = []
        self.gate = gate

    def generate(self, prompts: Sequence[str], params: SamplingParams) -> list[list[Completion]]:
        if self.gate is not None:
            self.gate.wait(10)
        if "bad" in prompts:
            raise ValueError("prompt 'bad' has too many tokens")
        self.calls.append((list(prompts), params))
        return [[Completion(f"{p}#{i}", (), (), "stop")] for i, p in enumerate(prompts)]


def test_requests_within_the_window_share_one_call_and_get_their_own_rows():
    generator = EchoGenerator()
    batcher = Batcher(generator, window_s=0.5, max_rows=64)
    try:
        futures = [batcher.submit("a", SamplingParams(num_samples=2)), batcher.submit("b", SamplingParams()),
                   batcher.submit("c", SamplingParams(num_samples=3))]
        results = [[c.text for c in f.result(10)] for f in futures]
    finally:
        batcher.close()
    assert len(generator.calls) == 1
    prompts, params = generator.calls[0]
    assert prompts == ["a", "a", "b", "c", "c", "c"] and params.num_samples == 1
    assert results == [["a#0", "a#1"], ["b#2"], ["c#3", "c#4", "c#5"]]
    assert (batcher.stats.calls, batcher.stats.requests, batcher.stats.largest_call_rows) == (1, 3, 6)


def test_requests_with_other_settings_get_their_own_call_and_each_call_a_new_seed():
    generator = EchoGenerator()
    batcher = Batcher(generator, window_s=0.5, seed=7)
    try:
        greedy = batcher.submit("a", SamplingParams(temperature=0, max_new_tokens=5))
        hot = batcher.submit("b", SamplingParams(temperature=0.8, max_new_tokens=5, stop_strings=("END",)))
        also_greedy = batcher.submit("c", SamplingParams(temperature=0, max_new_tokens=5))
        assert [greedy.result(10)[0].text, hot.result(10)[0].text, also_greedy.result(10)[0].text] == ["a#0", "b#0", "c#1"]
    finally:
        batcher.close()
    assert [(prompts, p.temperature, p.stop_strings, p.seed) for prompts, p in generator.calls] == [
        (["a", "c"], 0.0, (), 7), (["b"], 0.8, ("END",), 8)]


def test_requests_arriving_during_a_call_fill_the_next_one():
    gate = threading.Event()
    generator = EchoGenerator(gate)
    batcher = Batcher(generator, window_s=0.0)
    try:
        first = batcher.submit("first", SamplingParams())
        deadline = time.monotonic() + 10
        while not first.running() and time.monotonic() < deadline:  # the first call starts, held at the gate
            time.sleep(0.001)
        later = [batcher.submit(f"p{i}", SamplingParams()) for i in range(4)]
        gate.set()
        assert first.result(10)[0].text == "first#0"
        assert [f.result(10)[0].text for f in later] == ["p0#0", "p1#1", "p2#2", "p3#3"]
    finally:
        batcher.close()
    assert [len(prompts) for prompts, _ in generator.calls] == [1, 4]


def test_a_bad_prompt_fails_only_its_own_request():
    batcher = Batcher(EchoGenerator(), window_s=0.5)
    try:
        good, bad = batcher.submit("good", SamplingParams()), batcher.submit("bad", SamplingParams())
        assert good.result(10)[0].text == "good#0"
        with pytest.raises(ValueError, match="too many tokens"):
            bad.result(10)
    finally:
        batcher.close()
