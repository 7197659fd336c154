"""`python -m jaxrl.main eval`: sample k completions per task with the configured model, evaluate them in the
sandbox, and print the metrics table (jaxrl.evaluation.runner writes the run folder)."""

from __future__ import annotations

import sys
import time

from jaxrl.config import Config, ConfigError


def run(config: Config, progress: bool = True) -> int:
    """Checks the tasks, the model source and the sandbox first, then loads the model and evaluates; 0 on success."""
    from jaxrl import generators
    from jaxrl.data.task_source import TaskSelection, load_tasks
    from jaxrl.evaluation.runner import open_client, run_eval
    from jaxrl.policy import check_source, mesh_from_section

    try:
        problems = load_tasks(TaskSelection.from_section(config.eval))
    except (ValueError, FileNotFoundError) as exc:
        raise ConfigError(str(exc)) from exc
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
    print(result.metrics.table())
    print(f"\n{result.samples} samples of {result.problems} problems in {result.duration_s:.1f} s; "
          f"run folder: {result.run_dir}")
    return 0


def _note(text: str, enabled: bool) -> None:
    if enabled:
        print(text, file=sys.stderr, flush=True)
