#!/usr/bin/env bash
# The learning demonstration of issue 21 (docs/learning.md) on a lent GPU machine, where one command runs at most
# 10 minutes: `start` launches the recipe as a daemon in its own session (it runs on between commands while the
# machine is held), `watch SECONDS` reports its progress for a while and packs the results into $OUT.
#   bash scripts/device_learning.sh start [recipe args...]   # once the model and the data have arrived
#   bash scripts/device_learning.sh watch 540                 # in each following call
# The data travels packed (.device_carry/data-issue21.tar.gz, built on a CPU machine) and is unpacked into
# runs/data-issue21; the evaluation sets A, B and C are built on the machine (seconds) and checked against the lock.
set -u
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
source "$ROOT/scripts/device_setup.sh"
RUNS="$ROOT/runs"
LOG="$RUNS/learn-daemon.log"
PIDFILE="$RUNS/learn-daemon.pid"
# The recipe's default order (jaxrl/recipes/learning.py, DEFAULT_ORDER) but the data build: the data is carried.
STAGES="evalsets,eval-base/greedy+sft,select,eval-sft/greedy,filter,grpo,eval-grpo/greedy,eval-base/sampled,"
STAGES+="eval-sft/sampled,eval-grpo/sampled,report"
mkdir -p "$RUNS"

running() { [[ -f "$PIDFILE" ]] && kill -0 "$(cat "$PIDFILE")" 2>/dev/null; }

status_line() {
  local evals grpo
  evals=$(for f in "$RUNS"/issue21-eval-*/samples.jsonl "$RUNS"/issue21-select-*/samples.jsonl \
      "$RUNS"/issue21-filter-eval/samples.jsonl; do [[ -f $f ]] && printf '%s=%s ' \
    "$(basename "$(dirname "$f")" | sed 's/^issue21-\(eval-\)\?//')" "$(wc -l <"$f")"; done)
  grpo=$(for f in "$RUNS"/issue21-grpo-*/metrics.jsonl; do [[ -f $f ]] && printf '%s:step%s ' \
    "$(basename "$(dirname "$f")" | sed 's/^issue21-grpo-//')" \
    "$(tail -1 "$f" | python3 -c 'import json,sys; print(json.loads(sys.stdin.read()).get("step"))' 2>/dev/null)"; done)
  echo "[$(date +%H:%M:%S)] gpu $(nvidia-smi --query-gpu=utilization.gpu,memory.used --format=csv,noheader 2>/dev/null | tr -d ' ')" \
    "| $grpo| $evals"
}

pack() {
  [[ -n "${OUT:-}" ]] || return 0
  (cd "$RUNS" && tar czf "$OUT/learn-results.tar.gz" --exclude='checkpoints' --exclude='hf' --exclude='hf-step-*' \
    --exclude='jax-cache' --exclude='*.ready' issue21-* learn-sandbox.log 2>/dev/null)
  cp "$LOG" "$OUT/learn-daemon.log" 2>/dev/null
  ls -la "$OUT"
}

case "${1:-}" in
  start)
    shift
    if [[ ! -f "$RUNS/data-issue21/rl_tasks.jsonl" ]]; then
      tar xzf "$ROOT/.device_carry/data-issue21.tar.gz" -C "$RUNS" || { echo "no data to unpack" >&2; exit 1; }
    fi
    [[ -n "${TRITONRL_SMOLLM2_GGUF:-}" ]] || { echo "the SmolLM2 GGUF has not arrived (both parts?)" >&2; exit 1; }
    if running; then echo "already running (pid $(cat "$PIDFILE"))"; exit 0; fi
    # Several GPUs: the commands are spread over all of them, one GPU each (a --gpus among the arguments wins).
    count=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')
    spread=()
    (( count > 1 )) && spread=(--gpus "$(seq -s, 0 $((count - 1)))")
    setsid nohup python3 -m jaxrl.recipes.learning --output-root "$RUNS" --keep-going --stages "$STAGES" \
      "${spread[@]}" "$@" >>"$LOG" 2>&1 < /dev/null &
    echo $! >"$PIDFILE"
    echo "started the recipe, pid $(cat "$PIDFILE"), log $LOG"
    ;;
  watch)
    end=$((SECONDS + ${2:-540}))  # the call's limit minus time to pack: 540 s in a 600 s call
    while (( SECONDS < end )) && running; do
      status_line
      left=$((end - SECONDS)); (( left > 0 )) && sleep $(( left < 60 ? left : 60 ))
    done
    status_line
    running && echo "the recipe is still running" || echo "the recipe has finished"
    tail -n 40 "$LOG"
    pack
    ;;
  *) echo "usage: $0 start [recipe args] | watch SECONDS" >&2; exit 2 ;;
esac
