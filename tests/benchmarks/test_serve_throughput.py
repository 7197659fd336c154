"""The serve benchmark's CPU smoke run (--tiny): both sides measured on the bundled model, the ratio printed."""

from __future__ import annotations

import json

import pytest

from benchmark_scripts import load_benchmark


@pytest.mark.slow
def test_tiny_run_measures_both_sides_and_prints_the_ratio(tmp_path, capsys):
    bench = load_benchmark("serve_throughput")
    out = tmp_path / "serve.json"
    assert bench.main(["--tiny", "--set", "mesh.fsdp=1", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "serve / in-process tokens/s:" in printed
    summary = json.loads(out.read_text())
    sides = summary["sides"]
    # Greedy, same prompts, same max_tokens: both sides generate the same number of tokens.
    assert sides["serve"]["tokens"] == sides["in-process"]["tokens"] > 0
    assert summary["serve_over_in_process"] == pytest.approx(
        sides["serve"]["tokens_per_s"] / sides["in-process"]["tokens_per_s"])
    # The 2 concurrent requests (twice: warm-up and measurement) shared one generate call each time.
    assert summary["serve_batches"] == {"calls": 2, "requests": 4, "largest_call_rows": 2}
