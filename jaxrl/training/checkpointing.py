"""All checkpoint I/O of the trainers, through orbax's CheckpointManager (one folder per step).

A checkpoint holds two items: `state`, any pytree of arrays (a `TrainState`: step, parameters,
optimizer state, RNG key data), and `meta`, a JSON object for what lives on the host (the data
position, the trainer's name...). `restore` needs an abstract target (ShapeDtypeStructs with their
shardings, e.g. `trainer.abstract_train_state`) and places every array straight into that sharded
layout, so a model is never materialised on one device first, and a run can resume on another mesh.

Saves are atomic (orbax writes a temporary folder and renames it), so a run killed mid-save resumes
from the previous checkpoint. With `async_save` the arrays are copied to host memory before `save`
returns and written in the background; `wait()` blocks until every pending write is on disk.
Only the API of orbax-checkpoint >= 0.11 `CheckpointManager` + `ocp.args` is used (0.12 here).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import orbax.checkpoint as ocp

from jaxrl.config.schema import CheckpointSection, knob_problem

STATE = "state"
META = "meta"


class Checkpointer:
    """Numbered checkpoints in `directory`, keeping the newest `max_to_keep` (None: all)."""

    def __init__(self, directory: str | Path, *, max_to_keep: int | None = None, async_save: bool = False):
        problem = knob_problem(CheckpointSection, "max_to_keep", max_to_keep)
        if problem:
            raise ValueError(problem)
        self.directory = Path(directory).absolute()
        options = ocp.CheckpointManagerOptions(
            max_to_keep=max_to_keep, create=True, enable_async_checkpointing=async_save
        )
        self._manager = ocp.CheckpointManager(self.directory, options=options, item_names=(STATE, META))

    def steps(self) -> list[int]:
        """Steps with a complete checkpoint, ascending."""
        return sorted(self._manager.all_steps())

    def latest_step(self) -> int | None:
        return self._manager.latest_step()

    def save(self, step: int, state: Any, meta: Mapping[str, Any]) -> bool:
        """Saves `state` and the JSON-able `meta` as checkpoint `step`; False when it already exists."""
        if step in self._manager.all_steps():
            return False
        args = ocp.args.Composite(**{STATE: ocp.args.StandardSave(state), META: ocp.args.JsonSave(dict(meta))})
        return bool(self._manager.save(step, args=args, force=True))

    def restore(self, target: Any, step: int | None = None) -> tuple[Any, dict[str, Any]]:
        """(state laid out like `target`, meta) of checkpoint `step` (default: the newest)."""
        self.wait()
        step = self.latest_step() if step is None else step
        if step is None or step not in self._manager.all_steps():
            which = "at all" if step is None else f"for step {step}"
            raise FileNotFoundError(f"no checkpoint {which} in {self.directory}")
        args = ocp.args.Composite(**{STATE: ocp.args.StandardRestore(target), META: ocp.args.JsonRestore()})
        restored = self._manager.restore(step, args=args)
        return restored[STATE], dict(restored[META])

    def wait(self) -> None:
        """Blocks until every pending (asynchronous) save is complete."""
        self._manager.wait_until_finished()

    def close(self) -> None:
        self._manager.close()

    def __enter__(self) -> Checkpointer:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
