#!/usr/bin/env bash
# Set-up for a command on the lent GPU machine (see benchmarks/RESULTS.md): `source scripts/device_setup.sh`
# at the start of each device command. The image has torch, Triton, JAX, flax, optax, orbax and grpcio but
# no network; what it lacks travels in ignored folders named in the call's `carry`:
#   .whl/            wheels: grpcio-health-checking (== the image's grpcio), tensorboardX, gguf
#   .device_carry/   datasets/ (KernelBench JSONL + published timings), kb_harness/ (KernelBench's own
#                    harness, a copy kept outside the repository), model/ (the bundled SmolLM2 GGUF in parts,
#                    carried over two calls because one call carries at most 64 MiB), data/ (generated data)
# Idempotent and quick; prints what it found.
set -u
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
if [[ -d "$ROOT/.whl" ]] && ls "$ROOT"/.whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
    "$ROOT"/.whl/*.whl >/dev/null 2>&1 || echo "device_setup: wheel install failed" >&2
  export PYTHONPATH="/tmp/site${PYTHONPATH:+:$PYTHONPATH}"
fi
export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONUNBUFFERED=1
DATA="$ROOT/.device_carry/datasets"
if [[ -f "$DATA/kernelbench.jsonl" ]]; then
  export KERNELBENCH_JSONL="$DATA/kernelbench.jsonl"
  export TRITONRL_SHARED_DIR="$ROOT/.device_carry"
fi
# The SmolLM2 GGUF, reassembled from its parts once all of them have arrived (kept on the machine's disk).
MODEL_DIR=/tmp/tritonrl-model
if [[ ! -f "$MODEL_DIR/SmolLM2-135M-Instruct.Q4_1.gguf" ]] && ls "$ROOT"/.device_carry/model*/part-* >/dev/null 2>&1; then
  mkdir -p "$MODEL_DIR"
  expected=$(cat "$ROOT"/.device_carry/model*/parts 2>/dev/null | head -1)
  parts=()
  for ((i = 1; i <= ${expected:-0}; i++)); do
    part=$(ls "$ROOT"/.device_carry/model*/part-$i 2>/dev/null | head -1)
    [[ -n "$part" ]] && parts+=("$part")
  done
  if [[ -n "$expected" && ${#parts[@]} -eq "$expected" ]]; then
    cat "${parts[@]}" > "$MODEL_DIR/SmolLM2-135M-Instruct.Q4_1.gguf.tmp" && \
      mv "$MODEL_DIR/SmolLM2-135M-Instruct.Q4_1.gguf.tmp" "$MODEL_DIR/SmolLM2-135M-Instruct.Q4_1.gguf"
  fi
fi
if [[ -f "$MODEL_DIR/SmolLM2-135M-Instruct.Q4_1.gguf" ]]; then
  export TRITONRL_SMOLLM2_GGUF="$MODEL_DIR/SmolLM2-135M-Instruct.Q4_1.gguf"
fi
echo "device_setup: python $(python3 -c 'import sys; print(sys.version.split()[0])'), cores $(nproc)," \
  "KernelBench ${KERNELBENCH_JSONL:-missing}, model ${TRITONRL_SMOLLM2_GGUF:-not here}" >&2
