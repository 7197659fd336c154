"""`python -m jaxrl.main`: command selection, options, overrides, exit codes, and the eval command's output."""

from __future__ import annotations

import dataclasses
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from jaxrl import main as cli
from jaxrl.config import load_config
from jaxrl.sampling.api import Completion

REPO_ROOT = Path(__file__).resolve().parents[2]


class NoCodeGenerator:
    """Answers every prompt with prose and no code block: format errors, quick to evaluate."""

    def render(self, messages):
        return messages[-1]["content"]

    def generate(self, prompts, params):
        answer = Completion("I would use torch.relu here.", (1, 2, 3), (-0.1, -0.2, -0.3), "stop")
        return [[answer] * params.num_samples for _ in prompts]


def record_command(monkeypatch, name: str, result: int = 0) -> list:
    """Replace a command's implementation by one that records the config and options it receives."""
    calls = []

    def run(config, args):
        calls.append((config, args))
        return result

    monkeypatch.setitem(cli.COMMANDS, name, dataclasses.replace(cli.COMMANDS[name], run=run))
    return calls


def test_no_arguments_runs_eval_with_the_tiny_cpu_config(monkeypatch):
    calls = record_command(monkeypatch, "eval")
    assert cli.main([]) == 0
    (config, args), = calls
    assert config == load_config("eval_cpu_tiny")
    assert config.model.source == "smollm2-135m" and config.eval.cpu_sized and config.sandbox.targets == ()
    assert not args.no_progress


def test_overrides_without_a_command_go_to_the_default_command(monkeypatch):
    calls = record_command(monkeypatch, "eval")
    assert cli.main(["sampling.seed=3", "--no-progress", "eval.ids=[19]"]) == 0
    (config, args), = calls
    assert (config.sampling.seed, config.eval.ids, args.no_progress) == (3, (19,), True)


def test_config_file_and_overrides(monkeypatch, tmp_path):
    path = tmp_path / "mine.yaml"
    path.write_text("include: " + str(REPO_ROOT / "configs" / "base.yaml") + "\nsampling:\n  num_samples: 4\n")
    calls = record_command(monkeypatch, "eval")
    assert cli.main(["eval", "--config", str(path), "eval.k=[1,4]", "sandbox.targets=[localhost:5000]"]) == 0
    (config, _), = calls
    assert (config.sampling.num_samples, config.eval.k, config.sandbox.targets) == (4, (1, 4), ("localhost:5000",))


def test_override_values_in_scientific_notation_are_numbers(monkeypatch):
    calls = record_command(monkeypatch, "sft")
    assert cli.main(["sft", "optim.learning_rate=3e-3", "optim.eps=1E-8", "sandbox.timeout_s=2.5E+2"]) == 0
    optim, sandbox = calls[0][0].optim, calls[0][0].sandbox
    assert (optim.learning_rate, optim.eps, sandbox.timeout_s) == (3e-3, 1e-8, 250.0)


def test_commands_without_a_default_config_start_from_the_schema_defaults(monkeypatch):
    calls = record_command(monkeypatch, "grpo")
    assert cli.main(["grpo", "run.name=x"]) == 0
    assert calls[0][0] == load_config(None, ["run.name=x"])


def test_sample_has_a_json_flag(monkeypatch):
    calls = record_command(monkeypatch, "sample", result=0)
    assert cli.main(["sample", "--json"]) == 0
    assert calls[0][1].json is True


def test_the_command_exit_code_is_returned(monkeypatch):
    record_command(monkeypatch, "eval", result=3)
    assert cli.main(["eval"]) == 3


@pytest.mark.parametrize(
    "argv, message",
    [
        (["evaluate"], "unknown command 'evaluate'"),
        (["eval", "--bogus"], "unrecognized arguments: --bogus"),
        (["eval", "sampling.temperture=0.5"], "did you mean 'sampling.temperature'"),
        (["eval", "sampling.temperature=warm"], "sampling.temperature must be a number"),
        (["eval", "sandbox.targets=[nohost]"], "targets must be host:port"),
        (["eval", "eval.k=[5]"], "asks for more than sampling.num_samples"),
        (["eval", "--config", "no/such/file.yaml"], "config file not found"),
        (["--config", "eval_cpu_tiny", "eval"], "expected key=value overrides, got eval"),
    ],
)
def test_usage_and_config_errors_exit_2_with_a_message(monkeypatch, capsys, argv, message):
    calls = record_command(monkeypatch, "eval")
    assert cli.main(argv) == 2
    assert message in capsys.readouterr().err
    assert not calls


def test_the_command_runs_after_joining_a_multi_process_run(monkeypatch):
    order = []
    monkeypatch.setattr(cli.distributed, "initialize_from_env", lambda: order.append("join"))
    monkeypatch.setitem(cli.COMMANDS, "eval", dataclasses.replace(
        cli.COMMANDS["eval"], run=lambda config, args: order.append("run") or 0))
    assert cli.main(["eval"]) == 0
    assert order == ["join", "run"]


def test_bad_multi_process_variables_exit_2_before_the_command_runs(monkeypatch, capsys):
    calls = record_command(monkeypatch, "eval")
    monkeypatch.setenv("JAXRL_NUM_PROCESSES", "2")
    assert cli.main(["eval"]) == 2
    assert "missing JAXRL_COORDINATOR_ADDRESS, JAXRL_PROCESS_ID" in capsys.readouterr().err
    assert not calls


@pytest.fixture
def one_problem_jsonl(tmp_path) -> Path:
    """A KernelBench-format JSONL of one problem (level 1, id 19), so no KernelBench copy is needed."""
    code = (REPO_ROOT / "tests" / "sandbox_service" / "corpus" / "problems" / "relu.py").read_text()
    path = tmp_path / "kernelbench.jsonl"
    path.write_text(json.dumps({"level": 1, "problem_id": 19, "name": "19_ReLU", "code": code}) + "\n")
    return path


@pytest.mark.parametrize(
    "override, message",
    [
        ("eval.ids=[999]", "problem id(s) [999] not found"),
        ("model.source=/no/such/model", "model.source '/no/such/model': no such file or folder"),
    ],
)
def test_eval_checks_problems_and_model_source_before_loading_anything(monkeypatch, capsys, one_problem_jsonl,
                                                                        override, message):
    import jaxrl.generators

    def must_not_load(*args, **kwargs):
        raise AssertionError("the model was loaded despite a bad config")

    monkeypatch.setattr(jaxrl.generators, "load_generator", must_not_load)
    assert cli.main(["eval", f"eval.dataset={one_problem_jsonl}", "eval.ids=[19]", "eval.cpu_sized=false", override]) == 2
    assert message in capsys.readouterr().err


def test_print_config_prints_the_resolved_config_and_runs_nothing(monkeypatch, capsys):
    calls = record_command(monkeypatch, "grpo")
    assert cli.main(["grpo", "--print-config", "grpo.group_size=4", "optim.learning_rate=3e-6"]) == 0
    assert not calls
    printed = capsys.readouterr().out
    assert yaml.safe_load(printed) == load_config(None, ["grpo.group_size=4", "optim.learning_rate=3e-6"]).to_dict()


def test_an_unreachable_sandbox_target_exits_2_within_seconds(capsys, one_problem_jsonl):
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    started = time.monotonic()
    code = cli.main(["eval", f"eval.dataset={one_problem_jsonl}", "eval.ids=[19]", "eval.cpu_sized=false",
                     f"sandbox.targets=[127.0.0.1:{port}]"])
    assert code == 2 and time.monotonic() - started < 15
    err = capsys.readouterr().err
    assert err.startswith(f"error: sandbox.targets: cannot reach 127.0.0.1:{port} within 5 s") and err.count("\n") == 1


def test_a_cuda_sandbox_on_a_machine_without_one_exits_2(capsys, one_problem_jsonl):
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a CUDA GPU")
    assert cli.main(["eval", f"eval.dataset={one_problem_jsonl}", "eval.ids=[19]", "eval.cpu_sized=false",
                     "sandbox.backend=cuda"]) == 2
    assert capsys.readouterr().err.startswith("error: sandbox.backend=cuda, but torch sees no CUDA GPU here")


def test_a_missing_sft_data_file_exits_2_with_one_line(capsys):
    assert cli.main(["sft", "sft.data=/no/such.jsonl", "model.source=smollm2-135m"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: sft.data=/no/such.jsonl: no such file") and err.count("\n") == 1


def test_help_lists_the_commands(capsys):
    assert cli.main(["--help"]) == 0
    out = capsys.readouterr().out
    assert all(name in out for name in ("eval", "sample", "sft", "grpo", "data"))
    assert cli.main(["eval", "--help"]) == 0
    assert "--no-progress" in capsys.readouterr().out


def test_a_failing_command_exits_1_with_one_line_and_the_traceback_only_with_debug(monkeypatch, capsys):
    def broken(config, args):
        raise RuntimeError("the sandbox caught fire")

    monkeypatch.setitem(cli.COMMANDS, "eval", dataclasses.replace(cli.COMMANDS["eval"], run=broken))
    assert cli.main(["eval"]) == 1
    err = capsys.readouterr().err
    assert err == "error: eval failed: RuntimeError: the sandbox caught fire (--debug shows the traceback)\n"
    assert cli.main(["eval", "--debug"]) == 1
    err = capsys.readouterr().err
    assert "Traceback" in err and err.strip().endswith("error: eval failed: RuntimeError: the sandbox caught fire")


def test_a_missing_command_module_is_reported_as_not_implemented(monkeypatch, capsys):
    monkeypatch.setitem(cli.COMMANDS, "sft", dataclasses.replace(
        cli.COMMANDS["sft"], run=lambda config, args: cli._import("jaxrl.training.no_such_main", "sft").run(config)))
    assert cli.main(["sft"]) == 1
    expected = "`sft` is not implemented yet in this checkout (jaxrl.training.no_such_main is missing)"
    assert expected in capsys.readouterr().err


def test_a_missing_dependency_inside_a_command_module_is_not_hidden(tmp_path, monkeypatch):
    (tmp_path / "needs_missing_dep.py").write_text("import surely_not_installed_package\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ModuleNotFoundError, match="surely_not_installed_package"):
        cli._import("needs_missing_dep", "x")


def test_eval_prints_the_metrics_table_and_the_run_folder(monkeypatch, capsys, tmp_path):
    """The eval command end to end with a scripted generator instead of the model (the sandbox is real), on two
    tasks the data engine generates."""
    import jaxrl.generators

    monkeypatch.setattr(jaxrl.generators, "load_generator", lambda *a, **k: NoCodeGenerator())
    code = cli.main(["--no-progress", "eval.dataset=generated", "eval.num_generated=2", "eval.ids=null",
                     f"run.output_root={tmp_path}", "run.name=cli"])
    out = capsys.readouterr().out
    assert code == 0
    assert out.splitlines()[0].split()[:5] == ["group", "problems", "samples", "valid", "compiled"]
    assert any(line.split()[:3] == ["all", "2", "4"] for line in out.splitlines())
    assert f"run folder: {tmp_path / 'cli'}" in out
    files = {p.name for p in (tmp_path / "cli").iterdir()}
    assert files == {"config.yaml", "samples.jsonl", "metrics.json", "report.md"}
    report = (tmp_path / "cli" / "report.md").read_text()
    assert "- tasks evaluated: tasks generated by the data engine (seed 0, cpu scale)\n" in report


@pytest.mark.slow
def test_the_embedded_default_runs_the_bundled_model_end_to_end(tmp_path):
    """`python -m jaxrl.main` exactly as the README shows it, with the real model (minutes on 2 CPU cores)."""
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "HF_HUB_OFFLINE": "1"}
    env.pop("XLA_FLAGS", None)  # one CPU device, as a user would have
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "jaxrl.main", f"run.output_root={tmp_path}", "run.name=default"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "run folder:" in done.stdout and (tmp_path / "default" / "report.md").is_file()
    lines = (tmp_path / "default" / "samples.jsonl").read_text().splitlines()
    assert len(lines) == 6  # 3 problems x 2 samples
    print(f"python -m jaxrl.main took {time.monotonic() - started:.0f} s")
