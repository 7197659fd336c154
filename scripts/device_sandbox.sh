#!/usr/bin/env bash
# The sandbox's GPU checks and figures on a lent GPU machine, each stage's output under $OUT (or ./device-out):
#   bash scripts/device_sandbox.sh tests        # every `gpu` test of sandbox_service (and the executor's)
#   bash scripts/device_sandbox.sh replay       # benchmarks/replay_overhead.py
#   bash scripts/device_sandbox.sh throughput   # RL-sized evaluations a minute against the baseline checkout
#   bash scripts/device_sandbox.sh profile      # a short profiled run: where each role's CPU goes
#   bash scripts/device_sandbox.sh survey       # benchmarks/experiments/timing_protocol_survey.py (2 batches)
#   bash scripts/device_sandbox.sh full         # full-size level 1 against KernelBench's harness (needs
#                                               # .device_carry/datasets and .device_carry/kb_harness), server log kept
#   bash scripts/device_sandbox.sh judged       # the same comparison with every pair through the harness (about
#                                               # 420 s; L1/47's process takes 98-114 s) and no sequential rounds: one call
#   bash scripts/device_sandbox.sh gpus         # all GPUs of the host against one (all, one, one, all)
#   bash scripts/device_sandbox.sh spread       # how far a kernel's timed figure moves: between fresh processes per
#                                               # protocol, and in the server one evaluation at a time (about 170 s)
# Several stages run in the order given. The baseline is a `git archive` of another commit carried in
# .device_carry/base (see benchmarks/RESULTS.md); REPEATS (default 10) sets the throughput run's size and
# TIMING_RUNS (default 100, KernelBench's; the GRPO configurations time 30) its timed runs per evaluation.
set -u
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
source "$ROOT/scripts/device_setup.sh"
OUT=${OUT:-$ROOT/device-out}
mkdir -p "$OUT"
cd "$ROOT"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$OUT/device.txt"
git_rev=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
# The device's copy of the working tree may carry older git metadata than its files: say when they differ.
git diff --quiet HEAD -- 2>/dev/null || git_rev="$git_rev+changes"
for stage in "$@"; do
  started=$(date +%s)
  case "$stage" in
    tests)
      python3 -m pytest -q -p no:cacheprovider -m gpu tests/sandbox_service 2>&1 | tail -40 > "$OUT/gpu_tests.txt"
      ;;
    replay)
      python3 benchmarks/replay_overhead.py --out "$OUT/replay_overhead.json" > "$OUT/replay_overhead.txt" 2>&1
      ;;
    throughput)
      base=()
      [[ -d .device_carry/base ]] && base=(--baseline-root .device_carry/base)
      python3 benchmarks/sandbox_rl_throughput.py --size gpu --backend cuda --workers 16 \
        --repeats "${REPEATS:-10}" --timing-runs "${TIMING_RUNS:-100}" "${base[@]}" --out "$OUT/throughput.json" \
        > "$OUT/throughput.txt" 2>&1
      ;;
    profile)
      python3 benchmarks/sandbox_rl_throughput.py --size gpu --backend cuda --workers 16 --repeats 3 \
        --profile-dir "$OUT/profile" --out "$OUT/profile.json" > "$OUT/profile.txt" 2>&1
      rm -f "$OUT"/profile/*.prof "$OUT"/profile/*.modules
      ;;
    survey)
      timeout 280 python3 benchmarks/experiments/timing_protocol_survey.py --batches 2 --out "$OUT/survey.json" \
        > "$OUT/survey.txt" 2>&1
      ;;
    full)
      python3 benchmarks/sandbox_throughput.py --dataset .device_carry/datasets/kernelbench.jsonl \
        --baselines .device_carry/datasets/kernelbench_baseline_times --repeats 2 --time-budget 120 \
        --kernelbench-harness .device_carry/kb_harness --harness-budget 300 --harness-timeout 120 \
        --server-log "$OUT/full_server.log" --out "$OUT/full.json" > "$OUT/full.txt" 2>&1
      ;;
    judged)
      python3 benchmarks/sandbox_throughput.py --dataset .device_carry/datasets/kernelbench.jsonl \
        --baselines .device_carry/datasets/kernelbench_baseline_times --repeats 2 --time-budget 1 \
        --kernelbench-harness .device_carry/kb_harness --harness-budget 500 --harness-timeout 150 \
        --server-log "$OUT/judged_server.log" --out "$OUT/judged.json" > "$OUT/judged.txt" 2>&1
      ;;
    gpus)
      gpus=$(nvidia-smi -L | wc -l)
      python3 benchmarks/sandbox_rl_throughput.py --size gpu --backend cuda --workers 16 \
        --concurrency $(( 64 * gpus )) --repeats "${REPEATS:-20}" --timing-runs "${TIMING_RUNS:-100}" \
        --variant one_gpu:CUDA_VISIBLE_DEVICES=0 --variant one_gpu_2:CUDA_VISIBLE_DEVICES=0 \
        --variant all_gpus_2: \
        --out "$OUT/gpus.json" > "$OUT/gpus.txt" 2>&1
      ;;
    spread)
      python3 benchmarks/experiments/timing_across_processes.py --processes 6 --batches 2 --out "$OUT/across.json" \
        > "$OUT/spread.txt" 2>&1
      python3 benchmarks/sandbox_rl_throughput.py --size gpu --backend cuda --workers 16 --phases timed --repeats 4 \
        --concurrency 1 --out "$OUT/quiet.json" 2>&1 | grep -E "^\[|timed:" >> "$OUT/spread.txt"
      ;;
    *) echo "unknown stage $stage" >&2; exit 2 ;;
  esac
  echo "[$git_rev] $stage: $(( $(date +%s) - started )) s" | tee -a "$OUT/stages.txt"
  tail -5 "$OUT/${stage/tests/gpu_tests}.txt" 2>/dev/null
done
