#!/usr/bin/env bash
# Run the test suite: bootstrap the virtualenv (a no-op when up to date), then pytest over tests/.
# Extra arguments go to pytest (paths relative to the repository root), e.g.
# `scripts/test.sh tests/jaxrl -k sampler -x`.
# The exit status is pytest's (5 when no test was collected, which counts as a failure).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
VENV=$(realpath -m "${VENV:-$ROOT/.venv}")
export VENV

bash "$ROOT/scripts/bootstrap.sh"
cd "$ROOT"
# Without paths pytest takes pyproject.toml's testpaths (tests/).
exec "$VENV/bin/python" -m pytest -q "$@"
