"""Supervised fine-tuning: the completion-only loss, a deterministic data order, and the training loop.

Data order: epoch e visits the examples in `np.random.default_rng([seed, e]).permutation(N)`, in
batches of `batch_size` examples (the last batch of an epoch may be smaller). The position
(epoch, index) is all a resumed run needs to continue with exactly the batches it would have seen.
Each batch is tokenized, packed into rows (`packing.pack`) and split into micro-batches of
`micro_batch_rows` rows; `TrainStep` accumulates their gradients into one update, so the loss is the
mean over every completion token of the batch however it was split.

`SFTLoop.run` trains from a (state, position) to `total_steps`: metrics per step to the logger
(`train/loss`, `train/lr`, `train/grad_norm`, `train/tokens_per_s`...), the held-out loss every
`eval_every` steps and at the end (`eval/loss`), checkpoints every `checkpoint_every` steps and at
the end, the policy handed to `export` every `export_every` steps before the last (candidates for
choosing a checkpoint afterwards), and a progress bar.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax
from tqdm import tqdm

from jaxrl.data.sft_data import SFTExample
from jaxrl.training.checkpointing import Checkpointer
from jaxrl.training.logprobs import token_logprobs
from jaxrl.training.losses import LossOutput
from jaxrl.training.metrics_log import MetricsLogger, to_number
from jaxrl.training.packing import Overlong, Tokenizer, TokenizedExample, pack, split_rows, tokenize_example
from jaxrl.training.trainer import LossFn, TrainState, TrainStep

log = logging.getLogger(__name__)


def make_sft_loss(logits_chunk: int = 0, one_sequence_per_row: bool = False) -> LossFn:
    """Summed negative log-likelihood of the masked (completion) targets over the token count.
    `one_sequence_per_row`: rows are unpacked (see `token_logprobs`); packed SFT rows leave it False."""

    def sft_loss(model, batch, rng) -> LossOutput:
        del rng  # no dropout: SFT is deterministic
        logp = token_logprobs(
            model, batch["tokens"], batch["positions"], batch["segment_ids"], batch["targets"], logits_chunk,
            one_sequence_per_row,
        )
        mask = batch["loss_mask"].astype(jnp.float32)
        tokens = mask.sum()
        return LossOutput(-(jnp.where(mask > 0, logp, 0.0)).sum(), tokens, {"tokens": tokens})

    return sft_loss


@dataclasses.dataclass(frozen=True)
class DataPosition:
    """Where the next batch starts: `index` examples into the order of `epoch`."""

    epoch: int = 0
    index: int = 0

    def __post_init__(self) -> None:
        if self.epoch < 0 or self.index < 0:
            raise ValueError(f"data position must be non-negative, got {self}")

    def to_dict(self) -> dict[str, int]:
        return {"epoch": self.epoch, "index": self.index}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> DataPosition:
        return cls(int(data["epoch"]), int(data["index"]))


@dataclasses.dataclass(frozen=True)
class BatchOrder:
    """The deterministic order of examples per epoch and its cut into batches."""

    num_examples: int
    batch_size: int
    seed: int

    def __post_init__(self) -> None:
        if self.num_examples < 1 or self.batch_size < 1:
            raise ValueError(f"need >= 1 example and batch_size >= 1, got {self.num_examples}, {self.batch_size}")

    @property
    def steps_per_epoch(self) -> int:
        return -(-self.num_examples // self.batch_size)

    def order(self, epoch: int) -> np.ndarray:
        return np.random.default_rng([self.seed, epoch]).permutation(self.num_examples)

    def next(self, position: DataPosition) -> tuple[np.ndarray, DataPosition]:
        """(example indices of the batch at `position`, the position after it)."""
        if position.index >= self.num_examples:
            raise ValueError(f"position {position} is past the {self.num_examples} examples of an epoch")
        end = min(position.index + self.batch_size, self.num_examples)
        indices = self.order(position.epoch)[position.index : end]
        after = DataPosition(position.epoch + 1, 0) if end == self.num_examples else DataPosition(position.epoch, end)
        return indices, after


@dataclasses.dataclass
class SFTData:
    """Examples and how to turn them into packed rows."""

    examples: Sequence[SFTExample]
    tokenizer: Tokenizer
    max_seq_len: int
    overlong: Overlong = "drop"

    def tokenized(self, indices: Sequence[int]) -> list[TokenizedExample | None]:
        return [tokenize_example(self.examples[i], self.tokenizer, self.max_seq_len, self.overlong) for i in indices]

    def rows(self, indices: Sequence[int], row_multiple: int) -> tuple[dict[str, np.ndarray], int]:
        """(packed rows of the examples kept, number dropped as overlong)."""
        tokenized = self.tokenized(indices)
        kept = [t for t in tokenized if t is not None]
        return pack(kept, self.max_seq_len, row_multiple), len(tokenized) - len(kept)


@dataclasses.dataclass
class _Batch:
    micro_batches: list[dict[str, np.ndarray]]
    examples: int
    dropped: int
    rows: int
    tokens: int
    after: DataPosition


@dataclasses.dataclass
class SFTLoop:
    """Everything the loop needs besides the state; see the module docstring."""

    step_fn: TrainStep
    data: SFTData
    order: BatchOrder
    micro_batch_rows: int
    total_steps: int
    schedule: optax.Schedule
    eval_batches: list[dict[str, np.ndarray]] = dataclasses.field(default_factory=list)
    eval_every: int = 0
    log_every: int = 1
    checkpointer: Checkpointer | None = None
    checkpoint_every: int = 0
    logger: MetricsLogger | None = None
    progress: bool = True
    export_every: int = 0
    export: Callable[[int, TrainState], None] | None = None  # (step, state): writes the policy somewhere

    def run(self, state: TrainState, position: DataPosition) -> tuple[TrainState, DataPosition]:
        step = int(state.step)
        if step > self.total_steps:
            raise ValueError(f"the state is at step {step}, past total_steps={self.total_steps}")
        bar = tqdm(
            total=self.total_steps, initial=step, desc="sft", dynamic_ncols=True,
            disable=not self.progress or jax.process_index() != 0,
        )
        pending = self._prepare(position) if step < self.total_steps else None
        try:
            while step < self.total_steps:
                batch = pending
                started = time.perf_counter()
                lr = float(self.schedule(step))
                state, metrics = self.step_fn(state, batch.micro_batches)
                position = batch.after
                step += 1
                # Pack the next batch on the host while the device works on this one.
                pending = self._prepare(position) if step < self.total_steps else None
                values = {k: to_number(v, k) for k, v in jax.device_get(metrics).items()}
                elapsed = time.perf_counter() - started
                if batch.examples == batch.dropped:
                    log.warning("step %d: every example of the batch was longer than max_seq_len", step)
                bar.update(1)
                bar.set_postfix(loss=f"{values['loss']:.4f}", lr=f"{lr:.2e}")
                if self.logger is not None and (step % self.log_every == 0 or step == self.total_steps):
                    self.logger.log(step, {
                        "train/loss": values["loss"],
                        "train/lr": lr,
                        "train/grad_norm": values["grad_norm"],
                        "train/completion_tokens": values["tokens"],
                        "train/tokens": batch.tokens,
                        "train/tokens_per_s": batch.tokens / elapsed,
                        "train/step_time_s": elapsed,
                        "train/examples": batch.examples - batch.dropped,
                        "train/dropped_overlong": batch.dropped,
                        "train/rows": batch.rows,
                        "train/epoch": position.epoch + position.index / self.order.num_examples,
                    })
                final = step == self.total_steps
                if self.eval_batches and (final or (self.eval_every and step % self.eval_every == 0)):
                    self.log_eval(state, step)
                due = final or (self.checkpoint_every and step % self.checkpoint_every == 0)
                if self.checkpointer is not None and due:
                    self.checkpointer.save(step, state, {"data_position": position.to_dict(), "kind": "sft"})
                if self.export is not None and self.export_every and step % self.export_every == 0 and not final:
                    self.export(step, state)
        finally:
            bar.close()
        if self.checkpointer is not None:
            self.checkpointer.wait()
        return state, position

    def eval_loss(self, state: TrainState) -> tuple[float, float]:
        """(mean loss per completion token, completion tokens) over the held-out micro-batches."""
        numerator = denominator = 0.0
        for batch in self.eval_batches:
            num, den, _ = jax.device_get(self.step_fn.evaluate(state, batch))
            numerator += float(num)
            denominator += float(den)
        return numerator / max(denominator, 1.0), denominator

    def log_eval(self, state: TrainState, step: int) -> float:
        loss, tokens = self.eval_loss(state)
        if self.logger is not None:
            self.logger.log(step, {"eval/loss": loss, "eval/completion_tokens": tokens})
        return loss

    def _prepare(self, position: DataPosition) -> _Batch:
        indices, after = self.order.next(position)
        rows, dropped = self.data.rows(indices, self.micro_batch_rows)
        return _Batch(
            micro_batches=split_rows(rows, self.micro_batch_rows),
            examples=len(indices),
            dropped=dropped,
            rows=len(rows["tokens"]),
            tokens=int((rows["segment_ids"] > 0).sum()),
            after=after,
        )


def eval_micro_batches(data: SFTData, micro_batch_rows: int) -> tuple[list[dict[str, np.ndarray]], int]:
    """The held-out examples packed once into micro-batches; (batches, number dropped as overlong)."""
    rows, dropped = data.rows(range(len(data.examples)), micro_batch_rows)
    return split_rows(rows, micro_batch_rows), dropped
