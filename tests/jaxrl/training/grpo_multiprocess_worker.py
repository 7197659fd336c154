"""One process of test_grpo_multiprocess.py: GRPO steps of test_grpo's tiny model on an fsdp mesh over every
device of every process; what it saw goes to OUT_DIR/process-<index>.npz.

    python grpo_multiprocess_worker.py OUT_DIR

Every process passes a scorer whose verdicts depend on the process that calls it: process 0's rewards
completions that start with a lowercase letter, any other process's judges everything wrong. So a
process that scored its own rollout would train on other rewards than process 0's, and its calls are
counted. It joins a multi-process run as the CLI does (`jaxrl.distributed`); without JAXRL_* it runs alone.
"""

from __future__ import annotations

import sys
from pathlib import Path

import jax
import numpy as np
from multiprocess_worker import gathered
from grpo_helpers import lower_first, make_loop, wrong

from jaxrl import distributed
from jaxrl import sharding as shd
from jaxrl.training.grpo import FunctionScorer
from jaxrl.training.sft import DataPosition

STEPS = 2
TASKS, GROUP = 2, 8  # 16 samples a step


def main(out_dir: Path) -> None:
    distributed.initialize_from_env()
    calls = []

    def verdict(task, completion):
        calls.append(task.key)
        return lower_first(task, completion) if jax.process_index() == 0 else wrong()

    mesh = shd.make_mesh(shd.MeshConfig(data=1, fsdp=-1, tensor=1))
    # eps=1e-3 as in test_multiprocess: Adam's update stays a smooth function of the gradient, so the last
    # bits in which the two runs' gradient sums differ do not become sign flips of near-zero updates.
    loop, state = make_loop(mesh, FunctionScorer(verdict), steps=STEPS, group=GROUP, tasks=TASKS, micro_rows=8,
                            eps=1e-3)
    position, steps = DataPosition(), []
    for step in range(STEPS):
        state, position, values = loop.train_step(state, position, step)
        steps.append(values)
    # Wall-clock metrics differ from run to run; every other metric is a function of the rollout and update.
    keys = [key for key in steps[0] if not key.startswith(("time/", "throughput/"))]
    np.savez(out_dir / f"process-{jax.process_index()}.npz",
             process_count=np.int64(jax.process_count()),
             scorer_calls=np.int64(len(calls)),
             **{f"metric.{key}": np.array([values[key] for values in steps]) for key in keys},
             **gathered(state.params, "params"))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
