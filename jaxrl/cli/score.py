"""`python -m jaxrl.main score completions=PATH`: evaluate completions produced elsewhere (a JSONL or a
KernelBench runs/<name> folder, read by jaxrl.evaluation.score) with the sandbox, metrics and run folder of
`eval`, and print the metrics table."""

from __future__ import annotations

from jaxrl.cli.eval import report
from jaxrl.config import Config

# The command's short override forms.
ALIASES = {"completions": "score.completions"}


def run(config: Config, progress: bool = True) -> int:
    """Scores `score.completions` (a ConfigError, exit 2, when it is missing or malformed); 0 on success."""
    from jaxrl.evaluation.score import run_score

    return report(run_score(config, progress=progress))
