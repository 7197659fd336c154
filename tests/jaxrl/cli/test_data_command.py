"""`python -m jaxrl.main data`: the command around the build (config, engine, tokenizer, sandbox, output)."""

from __future__ import annotations

import dataclasses

from engine_fakes import FAKE_ENGINE, FakeClient, FakeTokens

from jaxrl import main as cli
from jaxrl.config import load_config
from jaxrl.cli import data as data_command
from jaxrl.data.engine.api import EngineUnavailable


class Info:
    backend = "interpreter"


class CommandClient(FakeClient):
    closed = False

    def server_info(self):
        return [Info()]

    def close(self):
        self.closed = True


def test_data_builds_with_the_cpu_config_by_default(monkeypatch):
    calls = []
    monkeypatch.setitem(cli.COMMANDS, "data", dataclasses.replace(
        cli.COMMANDS["data"], run=lambda config, args: calls.append((config, args)) or 0))
    assert cli.main(["data", "--no-progress", "data.seed=3"]) == 0
    (config, args), = calls
    assert config == load_config("data_cpu", ["data.seed=3"]) and args.no_progress
    assert config.run.name == "data-cpu" and config.data.scale == "cpu" and config.sandbox.backend == "interpreter"


def test_the_command_writes_the_run_folder_and_prints_the_summary(monkeypatch, tmp_path, capsys):
    client = CommandClient()
    monkeypatch.setattr(data_command, "default_engine", lambda: FAKE_ENGINE)
    monkeypatch.setattr(data_command, "load_token_counter", lambda name: FakeTokens())
    monkeypatch.setattr("jaxrl.evaluation.runner.open_client", lambda section: client)
    code = cli.main(["data", "--no-progress", f"run.output_root={tmp_path}", "data.sft_pairs=10", "data.rl_tasks=10",
                     "data.chunk_size=16", "data.kernelbench=null"])
    out = capsys.readouterr().out
    assert code == 0 and client.closed
    assert "SFT pairs 10/10, RL tasks 10/10" in out and f"run folder: {tmp_path / 'data-cpu'}" in out
    assert {p.name for p in (tmp_path / "data-cpu").iterdir()} == {
        "config.yaml", "sft.jsonl", "rl_tasks.jsonl", "card.md", "summary.json", "shards"}


def test_a_missing_engine_part_exits_1_and_says_which(monkeypatch, capsys):
    def missing():
        raise EngineUnavailable("the task generator is not in this checkout")

    monkeypatch.setattr(data_command, "default_engine", missing)
    assert cli.main(["data", "--no-progress"]) == 1
    assert "error: the task generator is not in this checkout" in capsys.readouterr().err


def test_unknown_families_are_a_configuration_error(monkeypatch, capsys):
    monkeypatch.setattr(data_command, "default_engine", lambda: FAKE_ENGINE)
    assert cli.main(["data", "--no-progress", "data.families=[relu,conv9]"]) == 2
    assert "data.families: unknown families ['conv9']" in capsys.readouterr().err
