"""One process of test_multiprocess.py: a few SFT steps on a mesh over every device of every process,
then a checkpoint saved and restored; what it saw goes to OUT_DIR/process-<index>.npz.

    python multiprocess_worker.py OUT_DIR [CHECKPOINT_DIR]

It joins a multi-process run exactly as the CLI does (`jaxrl.distributed`, JAXRL_* variables); without
them it runs alone. CHECKPOINT_DIR: another run's checkpoints, restored too (keys `foreign...`).
Every array is gathered to the host in full, so results of different process counts compare directly.
"""

from __future__ import annotations

import sys
from pathlib import Path

import jax
import numpy as np
from jax.experimental import multihost_utils
from sft_helpers import setup

from jaxrl import distributed
from jaxrl import sharding as shd
from jaxrl.models import tiny_qwen3
from jaxrl.training.checkpointing import Checkpointer
from jaxrl.training.trainer import abstract_train_state

STEPS = 3


def gathered(tree, prefix: str) -> dict[str, np.ndarray]:
    """Every leaf as its full value on the host, keyed by `prefix` + its tree path."""
    flat = jax.tree_util.tree_flatten_with_path(tree)[0]
    values = multihost_utils.process_allgather([leaf for _, leaf in flat], tiled=True)
    return {prefix + jax.tree_util.keystr(path): np.asarray(value) for (path, _), value in zip(flat, values)}


def main(out_dir: Path, foreign: Path | None) -> None:
    distributed.initialize_from_env()
    mesh = shd.make_mesh(shd.MeshConfig(data=1, fsdp=-1, tensor=1))
    # eps=1e-3 as in test_sft: Adam's update stays a smooth function of the gradient (see there).
    loop, state, position = setup(mesh, config=tiny_qwen3(), total_steps=STEPS, micro_batch_rows=2, eps=1e-3)
    state, position = loop.run(state, position)
    kernel = state.params["layers"][0]["mlp"]["up_proj"]["kernel"]
    result = {
        "process_count": np.int64(jax.process_count()),
        "device_count": np.int64(jax.device_count()),
        "kernel_devices": np.int64(len(kernel.sharding.device_set)),
        "kernel_local_shards": np.int64(len(kernel.addressable_shards)),
        "losses": np.array([m["train/loss"] for _, m in loop.logger.records]),
        "grad_norms": np.array([m["train/grad_norm"] for _, m in loop.logger.records]),
        **gathered(state, "trained"),
    }
    _, target, _ = abstract_train_state(tiny_qwen3(), loop.step_fn.optimizer, mesh)
    with Checkpointer(out_dir / "checkpoints") as checkpointer:
        checkpointer.save(STEPS, state, {"data_position": position.to_dict()})
        restored, meta = checkpointer.restore(target)
    result["restored_position"] = np.array([meta["data_position"]["epoch"], meta["data_position"]["index"]])
    result |= gathered(restored, "restored")
    if foreign is not None:
        with Checkpointer(foreign) as checkpointer:
            result |= gathered(checkpointer.restore(target)[0], "foreign")
    np.savez(out_dir / f"process-{jax.process_index()}.npz", **result)


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]) if len(sys.argv) > 2 else None)
