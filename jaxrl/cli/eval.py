"""`python -m jaxrl.main eval`: sample k completions per task with the configured model, evaluate them in the
sandbox, and print the metrics table (jaxrl.evaluation.runner writes the run folder).

With `model.endpoint` set the completions come from that OpenAI-compatible API (jaxrl.evaluation.endpoint)
instead of a model loaded here: same prompts, sandbox, metrics, pass@k and run folder."""

from __future__ import annotations

import dataclasses
import sys
import time

from jaxrl.config import Config, ConfigError


def run(config: Config, progress: bool = True) -> int:
    """Checks the tasks, the model source and the sandbox first, then loads the model and evaluates; 0 on success."""
    if config.model.endpoint is not None:  # an OpenAI-compatible API instead of an in-process model
        return run_endpoint(config, progress)
    from jaxrl import generators
    from jaxrl.evaluation.runner import open_client, run_eval
    from jaxrl.policy import check_source, mesh_from_section

    problems = _tasks(config)
    check_source(config.model)
    client = open_client(config.sandbox)
    try:
        _note(f"loading {config.model.source} ...", progress)
        started = time.monotonic()
        generator = generators.load_generator(config.model, mesh=mesh_from_section(config.mesh),
                                              sampling=config.sampling)
        _note(f"model ready in {time.monotonic() - started:.1f} s; {len(problems)} problems x "
              f"{config.sampling.num_samples} samples", progress)
        result = run_eval(config, generator, client=client, progress=progress, problems=problems)
    finally:
        client.close()
    return report(result)


def run_endpoint(config: Config, progress: bool = True) -> int:
    """`eval` with `model.endpoint` set: the runner's pipeline with completions from the endpoint.

    Each round sends `sampling.batch_size` rows (prompts x samples), raised to `model.max_concurrency`
    so every connection has work; the resolved model name and batch size are in the run's config.yaml.
    """
    from jaxrl.evaluation.endpoint import EndpointGenerator
    from jaxrl.evaluation.runner import open_client, run_eval

    problems = _tasks(config)
    tokenizer = _endpoint_tokenizer(config)
    client = open_client(config.sandbox)
    try:
        with EndpointGenerator(config.model, tokenizer=tokenizer) as generator:
            rows = max(config.sampling.batch_size, config.model.max_concurrency)
            config = dataclasses.replace(config, model=dataclasses.replace(config.model, name=generator.model_name),
                                         sampling=dataclasses.replace(config.sampling, batch_size=rows))
            result = run_eval(config, generator, client=client, progress=progress, problems=problems)
    finally:
        client.close()
    return report(result)


def _endpoint_tokenizer(config: Config):
    """The chat template's tokenizer for api=completion (jaxrl.policy reads model.tokenizer); None for api=chat."""
    if config.model.api != "completion" or config.model.tokenizer is None:
        return None  # EndpointGenerator says that api=completion needs model.tokenizer
    from jaxrl.policy import load_tokenizer

    try:
        return load_tokenizer(config.model)
    except ConfigError:
        raise
    except (OSError, ValueError) as exc:
        raise ConfigError(f"model.tokenizer {config.model.tokenizer!r}: {exc}") from exc


def _tasks(config: Config):
    """The `eval` section's tasks; a bad selection is a ConfigError (exit 2) before any model or sandbox work."""
    from jaxrl.data.task_source import TaskSelection, load_tasks

    try:
        return load_tasks(TaskSelection.from_section(config.eval))
    except (ValueError, FileNotFoundError) as exc:
        raise ConfigError(str(exc)) from exc


def report(result) -> int:
    """Prints an evaluation's metrics table and run folder (an EvalRun of `eval` or `score`); 0."""
    print(result.metrics.table())
    print(f"\n{result.samples} samples of {result.problems} problems in {result.duration_s:.1f} s; "
          f"run folder: {result.run_dir}")
    return 0


def _note(text: str, enabled: bool) -> None:
    if enabled:
        print(text, file=sys.stderr, flush=True)
