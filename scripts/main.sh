#!/usr/bin/env bash
# The main job on its embedded default: set up (a no-op when up to date), then `python -m jaxrl.main`,
# which evaluates the bundled SmolLM2-135M on a few CPU-sized KernelBench level-1 problems through a
# local sandbox (Triton interpreter when there is no GPU) and prints the metrics table.
# Arguments go to jaxrl.main, e.g. `scripts/main.sh eval --config configs/eval_default.yaml model.source=/ckpt`.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
VENV=$(realpath -m "${VENV:-$ROOT/.venv}")
export VENV

bash "$ROOT/scripts/bootstrap.sh"
cd "$ROOT"
exec "$VENV/bin/python" -m jaxrl.main "$@"
