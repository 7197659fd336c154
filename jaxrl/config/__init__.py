"""Typed configuration: YAML files with includes + `key=value` overrides -> a validated `Config`.

    from jaxrl.config import load_config
    config = load_config("configs/eval_default.yaml", ["sampling.temperature=0.7", "eval.levels=[1]"])
    config.sampling.temperature  # 0.7
"""

from jaxrl.config.loader import all_keys, dump_config, load_config
from jaxrl.config.schema import (
    Config,
    ConfigError,
    DataSection,
    EvalSection,
    MeshSection,
    ModelSection,
    RunSection,
    SampleSection,
    SamplingSection,
    SandboxSection,
    ScoreSection,
    Section,
    ServeSection,
)

__all__ = [
    "Config",
    "ConfigError",
    "DataSection",
    "EvalSection",
    "MeshSection",
    "ModelSection",
    "RunSection",
    "SampleSection",
    "SamplingSection",
    "SandboxSection",
    "ScoreSection",
    "Section",
    "ServeSection",
    "all_keys",
    "dump_config",
    "load_config",
]
