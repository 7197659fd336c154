"""The command line: `python -m jaxrl.main [COMMAND] [--config FILE] [key=value ...]`.

With no command it runs the embedded default: the bundled SmolLM2-135M evaluated on a few CPU-sized
KernelBench level-1 problems with an embedded sandbox (configs/eval_cpu_tiny.yaml), then prints
the metrics table. Commands live in `COMMANDS` (name -> Command), their code in `jaxrl.cli` (one module per
command: eval, sample, sft, grpo, score, serve, data); each receives the validated Config. Commands whose module
is not part of this checkout say so instead of failing obscurely. Every command takes `--print-config` (print the resolved config as YAML and
stop) and `--debug` (a failure's traceback; without it every error is one line on stderr).

Several processes (one per host) join one run through the JAXRL_* variables of `jaxrl.distributed`.

Exit codes: 0 success; 2 usage or configuration error (unknown command, bad option, bad override,
missing config or data file, a problem selection or model source that does not exist, a sandbox target that
does not answer or a backend this machine lacks, no KernelBench found or downloadable, nothing to `score`, a
`serve` port that is taken, a `model.endpoint` that cannot list its models, bad JAXRL_* variables); 1 any other
failure; 130 interrupted.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import sys
import traceback
from collections.abc import Callable, Sequence

from jaxrl import distributed
from jaxrl.config import Config, ConfigError, load_config
from jaxrl.config.yaml_io import dump_yaml
from jaxrl.data.engine.api import EngineUnavailable
from jaxrl.data.kernelbench_source import KernelBenchUnavailable

DEFAULT_COMMAND = "eval"
EXIT_OK, EXIT_FAILURE, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130


class UsageError(Exception):
    """Bad command line; the message says what to do instead."""


class NotAvailable(Exception):
    """A command whose implementation is not in this checkout."""


@dataclasses.dataclass(frozen=True)
class Command:
    """One subcommand: `run(config, args) -> exit code`; `default_config` is used when --config is absent."""

    help: str
    run: Callable[[Config, argparse.Namespace], int]
    default_config: str | None = None
    add_arguments: Callable[[argparse.ArgumentParser], None] = lambda parser: None
    # Rewrites the command's short override forms (e.g. `temperature=0`) into dotted keys.
    expand_overrides: Callable[[list[str]], list[str]] = lambda overrides: overrides


def _import(module: str, command: str):
    """The module behind a command; NotAvailable only when that module itself is missing."""
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        if exc.name is not None and (module == exc.name or module.startswith(exc.name + ".")):
            raise NotAvailable(f"`{command}` is not implemented yet in this checkout ({module} is missing)") from None
        raise


def run_eval_command(config: Config, args: argparse.Namespace) -> int:
    return _import("jaxrl.cli.eval", "eval").run(config, progress=not args.no_progress)


def run_score_command(config: Config, args: argparse.Namespace) -> int:
    return _import("jaxrl.cli.score", "score").run(config, progress=not args.no_progress)


def run_serve_command(config: Config, args: argparse.Namespace) -> int:
    return _import("jaxrl.cli.serve", "serve").run(config)


def run_sample_command(config: Config, args: argparse.Namespace) -> int:
    return _import("jaxrl.cli.sample", "sample").run_sample(config, as_json=args.json)


def run_sft_command(config: Config, args: argparse.Namespace) -> int:
    return _import("jaxrl.cli.sft", "sft").run(config)


def run_grpo_command(config: Config, args: argparse.Namespace) -> int:
    return _import("jaxrl.cli.grpo", "grpo").run(config)


def run_data_command(config: Config, args: argparse.Namespace) -> int:
    return _import("jaxrl.cli.data", "data").run(config, progress=not args.no_progress)


def _eval_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--no-progress", action="store_true", help="no progress bars on stderr")


def _sample_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print one JSON object: text, token_ids, logprobs")


def _sample_aliases(overrides: list[str]) -> list[str]:
    """`model=`, `prompt=`, `max_new_tokens=`, `temperature=` ... as the issue names them."""
    from jaxrl.cli.sample import expand_aliases

    return expand_aliases(overrides)


def _score_aliases(overrides: list[str]) -> list[str]:
    """`completions=PATH` for score.completions."""
    from jaxrl.cli.sample import expand_aliases
    from jaxrl.cli.score import ALIASES

    return expand_aliases(overrides, ALIASES)


COMMANDS: dict[str, Command] = {
    "eval": Command(
        "sample k completions per KernelBench problem, evaluate them in the sandbox, write metrics",
        run_eval_command, default_config="eval_cpu_tiny", add_arguments=_eval_arguments,
    ),
    "sample": Command("sample completions for prompts with the configured model", run_sample_command,
                      add_arguments=_sample_arguments, expand_overrides=_sample_aliases),
    "sft": Command("supervised fine-tuning", run_sft_command),
    "grpo": Command("GRPO reinforcement learning with sandbox rewards", run_grpo_command),
    "score": Command("evaluate completions produced elsewhere (a JSONL or a KernelBench runs folder), as eval does",
                     run_score_command, add_arguments=_eval_arguments, expand_overrides=_score_aliases),
    "serve": Command("serve model.source over an OpenAI-compatible HTTP API (docs/ecosystem.md)", run_serve_command),
    "data": Command("build verified, decontaminated, split SFT and RL data with the data engine (docs/data.md)",
                    run_data_command, default_config="data_cpu", add_arguments=_eval_arguments),
}


def _command_list() -> str:
    width = max(map(len, COMMANDS))
    return "\n".join(f"  {name.ljust(width)}  {command.help}" for name, command in COMMANDS.items())


def _top_help() -> str:
    return (
        "usage: python -m jaxrl.main [COMMAND] [--config FILE] [key=value ...]\n\n"
        f"commands:\n{_command_list()}\n\n"
        f"With no command: `{DEFAULT_COMMAND}` with configs/{COMMANDS[DEFAULT_COMMAND].default_config}.yaml"
        " (the bundled\nSmolLM2-135M on a few CPU-sized level-1 problems). `python -m jaxrl.main COMMAND --help` for a\n"
        "command's options. Overrides are dotted keys, e.g. sampling.temperature=0.7 eval.levels=[1].\n"
    )


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # argparse would exit; we raise to keep one exit path
        raise UsageError(f"{message}\n{self.format_usage().strip()}")


def parse_args(argv: Sequence[str]) -> tuple[str, argparse.Namespace]:
    """(command name, parsed options). The command is the first argument unless it is an option or an override."""
    argv = list(argv)
    name = DEFAULT_COMMAND
    if argv and not argv[0].startswith("-") and "=" not in argv[0]:
        name = argv.pop(0)
        if name not in COMMANDS:
            raise UsageError(f"unknown command {name!r}; commands:\n{_command_list()}")
    command = COMMANDS[name]
    parser = _Parser(prog=f"python -m jaxrl.main {name}", description=command.help)
    default = f"configs/{command.default_config}.yaml" if command.default_config else "the schema defaults"
    parser.add_argument("--config", metavar="FILE",
                        help=f"YAML config file or a name under configs/ (default: {default})")
    parser.add_argument("--print-config", action="store_true", help="print the resolved config as YAML and stop")
    parser.add_argument("--debug", action="store_true", help="show a failure's traceback")
    command.add_arguments(parser)
    parser.add_argument("overrides", nargs="*", metavar="key=value", help="config overrides, e.g. sampling.seed=3")
    args = parser.parse_intermixed_args(argv)  # options may come between overrides
    bad = [o for o in args.overrides if "=" not in o]
    if bad:
        commands = ", ".join(COMMANDS)
        raise UsageError(f"expected key=value overrides, got {' '.join(bad)} (commands go first: {commands})")
    return name, args


def main(argv: Sequence[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv and argv[0] in ("-h", "--help"):
        print(_top_help())
        return EXIT_OK
    try:
        name, args = parse_args(argv)
        command = COMMANDS[name]
        config = load_config(args.config or command.default_config, command.expand_overrides(args.overrides))
    except SystemExit as exc:  # --help of a command
        return EXIT_OK if exc.code in (0, None) else EXIT_USAGE
    except (UsageError, ConfigError, FileNotFoundError) as exc:
        return _fail(exc, EXIT_USAGE, debug="--debug" in argv)
    if args.print_config:
        print(dump_yaml(config.to_dict()), end="")
        return EXIT_OK
    try:
        distributed.initialize_from_env()  # before any JAX use; a no-op unless JAXRL_* asks for several processes
        return COMMANDS[name].run(config, args)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except (NotAvailable, EngineUnavailable) as exc:
        return _fail(exc, EXIT_FAILURE, args.debug)
    # Unusable input, found before the work: a config value, a file that is not there, no data.
    except (ConfigError, FileNotFoundError, KernelBenchUnavailable) as exc:
        return _fail(exc, EXIT_USAGE, args.debug)
    except Exception as exc:  # noqa: BLE001 - the top level reports every failure in one line
        return _fail(exc, EXIT_FAILURE, args.debug, f"{name} failed: {type(exc).__name__}: ")


def _fail(exc: BaseException, code: int, debug: bool, prefix: str = "") -> int:
    """One line on stderr (the traceback before it with --debug); returns the exit code."""
    if debug:
        traceback.print_exception(exc)
    hint = "" if debug or code == EXIT_USAGE else " (--debug shows the traceback)"
    print(f"error: {prefix}{exc}{hint}", file=sys.stderr)
    return code


if __name__ == "__main__":
    sys.exit(main())
