"""`python -m jaxrl.main score`: the command (jaxrl/cli/score.py) around jaxrl.evaluation.score."""

from __future__ import annotations

from types import SimpleNamespace

from jaxrl import main as cli


def test_score_without_completions_is_a_usage_error(capsys):
    assert cli.main(["score", "--no-progress"]) == 2  # nothing to score: a usage error, not a traceback
    assert "give completions=PATH" in capsys.readouterr().err


def test_the_command_takes_completions_as_a_short_form_and_prints_the_metrics(monkeypatch, tmp_path, capsys):
    import jaxrl.evaluation.score

    seen = []

    def run_score(config, progress):
        seen.append((config.score.completions, progress))
        return SimpleNamespace(metrics=SimpleNamespace(table=lambda: "METRICS TABLE"), samples=3, problems=2,
                               duration_s=1.0, run_dir=tmp_path / "run")

    monkeypatch.setattr(jaxrl.evaluation.score, "run_score", run_score)
    assert cli.main(["score", f"completions={tmp_path}/gen.jsonl", "--no-progress"]) == 0
    assert seen == [(f"{tmp_path}/gen.jsonl", False)]
    out = capsys.readouterr().out
    assert "METRICS TABLE" in out and f"3 samples of 2 problems in 1.0 s; run folder: {tmp_path / 'run'}" in out


def test_print_config_shows_the_short_form_resolved(capsys):
    assert cli.main(["score", "completions=gen.jsonl", "--print-config"]) == 0
    assert "completions: gen.jsonl" in capsys.readouterr().out
