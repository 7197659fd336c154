"""`python -m jaxrl.main data`: build the data engine's data set in <run.output_root>/<run.name>.

The config's `data` section says what to build, its `sandbox` section where references and pairs run (an
embedded server unless `sandbox.targets`). With a fixed `run.name` (the data configs set one) running the
same command again resumes after the last finished shard, and raising the targets extends the build.
docs/data.md describes the outputs.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path

from jaxrl.config.loader import dump_config
from jaxrl.config.schema import Config, ConfigError
from jaxrl.data.engine.api import default_engine
from jaxrl.data.engine.build import BuildSettings, build, resolve_splits
from jaxrl.data.engine.kernelbench_corpus import load_corpus
from jaxrl.data.engine.tokens import load_token_counter

log = logging.getLogger(__name__)


def run(config: Config, progress: bool = True) -> int:
    d = config.data
    engine = default_engine()
    try:
        resolve_splits(engine, d)
        corpus = load_corpus(d.kernelbench)
    except (ValueError, FileNotFoundError) as exc:
        raise ConfigError(str(exc)) from exc
    tokens = load_token_counter(d.tokenizer)
    run_dir = Path(config.run.output_root) / (config.run.name or f"data-{time.strftime('%Y%m%d-%H%M%S')}")
    run_dir.mkdir(parents=True, exist_ok=True)
    dump_config(config, run_dir / "config.yaml")

    from jaxrl.evaluation.runner import open_client

    client = open_client(config.sandbox)
    try:
        backend = client.server_info()[0].backend
        settings = BuildSettings.from_config(config, gpu=backend == "cuda")
        if d.scale == "full" and not settings.gpu:
            log.warning("data.scale=full on the %s backend: full-size references are slow without a GPU", backend)
        result = build(settings, run_dir, client, engine, tokens, corpus, progress=progress)
    finally:
        client.close()
    print(result.report)
    print(f"\nrun folder: {run_dir}")
    return 0
