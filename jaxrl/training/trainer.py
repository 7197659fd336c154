"""Sharded training scaffolding shared by SFT and GRPO: the train state and a gradient-accumulating step.

    graphdef, state = init_train_state(model, optimizer, mesh, seed)      # or abstract_train_state
    step = TrainStep(graphdef, loss_fn, optimizer, mesh, shardings)
    state, metrics = step(state, micro_batches)                            # one optimizer update

`loss_fn(model, batch, rng) -> LossOutput` (jaxrl.training.losses) returns an unreduced numerator,
a denominator and metric sums for one micro-batch. The step sums the numerator's gradients, the
denominators and the metrics over any number of micro-batches, then divides once: the update is
exactly that of one batch holding all of them (token-mean over all tokens of the global batch).
Micro-batches are {name: array [rows, ...]} with rows split over the mesh's batch axes (data,
fsdp); parameters, gradients and optimizer state are laid out by the model's declared specs
(`jaxrl.sharding`), the optimizer state by the parameter it belongs to. Everything runs under
`jax.set_mesh(mesh)`, so the model's activation constraints apply; on several hosts every process
calls the same functions with the same host batches.

Parameters are held as the nnx pure dict (`nnx.to_pure_dict(nnx.split(model)[1])`) and the model is
rebuilt inside jit with `nnx.merge(graphdef, params)`. The RNG is kept as raw key data (uint32), so
checkpoints hold it like any array; each micro-batch gets `fold_in(fold_in(key, step), index)`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from jaxrl import sharding as shd
from jaxrl.models.config import BATCH, ModelConfig
from jaxrl.models.transformer import Transformer
from jaxrl.training.losses import LossOutput, loss_value

Batch = Mapping[str, Any]
LossFn = Callable[[nnx.Module, Batch, jax.Array], LossOutput]


@jax.tree_util.register_dataclass
@dataclasses.dataclass
class TrainState:
    """Everything an update changes: step (int32 scalar), params (pure dict), opt_state, rng (key data)."""

    step: Any
    params: Any
    opt_state: Any
    rng: Any


@jax.tree_util.register_dataclass
@dataclasses.dataclass
class Accumulator:
    """Sums over the micro-batches of one step: float32 gradients of the numerator, numerator,
    denominator and the loss's metric sums."""

    grads: Any
    numerator: Any
    denominator: Any
    metrics: Any


def param_shardings(state: nnx.State, mesh: Mesh) -> Any:
    """Pure dict of the NamedSharding of every parameter (concrete or abstract state)."""
    return nnx.to_pure_dict(shd.state_shardings(state, mesh))


def opt_state_shardings(abstract_opt_state: Any, abstract_params: Any, params_shardings: Any, mesh: Mesh) -> Any:
    """A sharding for each optimizer-state leaf: that of the parameter whose tree path ends the leaf's
    own path, when their shapes agree (Adam's mu and nu mirror the parameters); else replicated."""
    flat_params = jax.tree_util.tree_flatten_with_path(abstract_params)[0]
    flat_shardings = jax.tree.leaves(params_shardings)
    by_path = {path: (leaf.shape, s) for (path, leaf), s in zip(flat_params, flat_shardings)}
    replicated = NamedSharding(mesh, P())

    def pick(path, leaf):
        for start in range(len(path)):
            match = by_path.get(tuple(path[start:]))
            if match is not None:
                shape, sharding = match
                return sharding if tuple(leaf.shape) == tuple(shape) else replicated
        return replicated

    return jax.tree_util.tree_map_with_path(pick, abstract_opt_state)


def train_state_shardings(state: nnx.State, optimizer: optax.GradientTransformation, mesh: Mesh) -> TrainState:
    """TrainState of NamedShardings for a model state (concrete or abstract)."""
    p_shardings = param_shardings(state, mesh)
    abstract_params = jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype), nnx.to_pure_dict(state))
    abstract_opt = jax.eval_shape(optimizer.init, abstract_params)
    replicated = NamedSharding(mesh, P())
    return TrainState(
        step=replicated,
        params=p_shardings,
        opt_state=opt_state_shardings(abstract_opt, abstract_params, p_shardings, mesh),
        rng=replicated,
    )


def abstract_train_state(
    model_config: ModelConfig, optimizer: optax.GradientTransformation, mesh: Mesh
) -> tuple[nnx.GraphDef, TrainState, TrainState]:
    """(graphdef, TrainState of sharded ShapeDtypeStructs, shardings) without allocating anything:
    the restore target of a checkpoint."""
    graphdef, state = nnx.split(nnx.eval_shape(lambda: Transformer(model_config, rngs=nnx.Rngs(0))))
    shardings = train_state_shardings(state, optimizer, mesh)
    abstract_params = jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype), nnx.to_pure_dict(state))
    abstract = TrainState(
        step=jax.ShapeDtypeStruct((), jnp.int32),
        params=abstract_params,
        opt_state=jax.eval_shape(optimizer.init, abstract_params),
        rng=jax.eval_shape(lambda: jax.random.key_data(jax.random.key(0))),
    )
    with_shardings = jax.tree.map(
        lambda a, s: jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=s), abstract, shardings
    )
    return graphdef, with_shardings, shardings


def init_train_state(
    model: nnx.Module, optimizer: optax.GradientTransformation, mesh: Mesh, seed: int
) -> tuple[nnx.GraphDef, TrainState, TrainState]:
    """(graphdef, state at step 0, shardings) from a model; its parameters are resharded onto `mesh`."""
    graphdef, state = nnx.split(model)
    shardings = train_state_shardings(state, optimizer, mesh)
    params = jax.device_put(nnx.to_pure_dict(state), shardings.params)
    opt_state = jax.jit(optimizer.init, out_shardings=shardings.opt_state)(params)
    rng = jax.device_put(jax.random.key_data(jax.random.key(seed)), shardings.rng)
    step = jax.device_put(jnp.zeros((), jnp.int32), shardings.step)
    return graphdef, TrainState(step, params, opt_state, rng), shardings


def model_from_state(graphdef: nnx.GraphDef, state: TrainState) -> nnx.Module:
    """The model holding the state's current parameters (shares their arrays)."""
    return nnx.merge(graphdef, state.params)


def global_norm(tree: Any) -> jax.Array:
    """The L2 norm of all leaves together (float32)."""
    return jnp.sqrt(sum(jnp.sum(jnp.square(x.astype(jnp.float32))) for x in jax.tree.leaves(tree)))


def micro_rng(state: TrainState, index: jax.Array) -> jax.Array:
    return jax.random.fold_in(jax.random.fold_in(jax.random.wrap_key_data(state.rng), state.step), index)


class TrainStep:
    """One optimizer update from a list of micro-batches (see the module docstring).

    `accumulate` and `apply` are compiled once each (per micro-batch shape); `accumulate` donates the
    accumulator and `apply` the old state, so do not reuse a state after passing it in. `evaluate` returns the
    loss's (numerator, denominator, metric sums) of a micro-batch without gradients.
    Metrics of a step: `loss` (numerator / denominator), `grad_norm` (of the mean gradient, before
    clipping), `denominator` and the summed metrics of the loss function.
    """

    def __init__(
        self,
        graphdef: nnx.GraphDef,
        loss_fn: LossFn,
        optimizer: optax.GradientTransformation,
        mesh: Mesh,
        shardings: TrainState,
        batch_spec: P = P(BATCH),
    ):
        self.graphdef = graphdef
        self.loss_fn = loss_fn
        self.optimizer = optimizer
        self.mesh = mesh
        self.shardings = shardings
        self.batch_spec = batch_spec
        self._replicated = NamedSharding(mesh, P())
        self._acc_shardings: Accumulator | None = None
        self._accumulate = None
        self._apply = None
        self._evaluate = jax.jit(self._eval_fn, out_shardings=self._replicated)

    # ------------------------------------------------------------------ public

    def __call__(self, state: TrainState, micro_batches: Iterable[Batch]) -> tuple[TrainState, dict[str, jax.Array]]:
        acc = None
        for index, batch in enumerate(micro_batches):
            placed = self.place(batch)
            if acc is None:
                acc = self.zeros(state, placed)
            acc = self.accumulate(state, acc, placed, index)
        if acc is None:
            raise ValueError("a train step needs at least one micro-batch")
        return self.apply(state, acc)

    def place(self, batch: Batch) -> dict[str, jax.Array]:
        """Host arrays [rows, ...] onto the mesh, rows split over the batch axes."""
        return {name: shd.shard_array(np.asarray(x), self.mesh, self.batch_spec) for name, x in batch.items()}

    def zeros(self, state: TrainState, batch: Batch) -> Accumulator:
        """An empty accumulator (gradients float32, laid out like the parameters)."""
        if self._acc_shardings is None:
            self._build(state, batch)
        return self._zeros(state.params)

    def accumulate(self, state: TrainState, acc: Accumulator, batch: Batch, index: int) -> Accumulator:
        with jax.set_mesh(self.mesh):
            return self._accumulate(state, acc, batch, jnp.asarray(index, jnp.int32))

    def apply(self, state: TrainState, acc: Accumulator) -> tuple[TrainState, dict[str, jax.Array]]:
        with jax.set_mesh(self.mesh):
            return self._apply(state, acc)

    def evaluate(self, state: TrainState, batch: Batch) -> tuple[jax.Array, jax.Array, dict[str, jax.Array]]:
        with jax.set_mesh(self.mesh):
            return self._evaluate(state, self.place(batch))

    # ------------------------------------------------------------------ compiled parts

    def _loss(self, params: Any, batch: Batch, rng: jax.Array) -> tuple[jax.Array, LossOutput]:
        out = self.loss_fn(nnx.merge(self.graphdef, params), batch, rng)
        return out.numerator, out

    def _build(self, state: TrainState, batch: Batch) -> None:
        with jax.set_mesh(self.mesh):
            out = jax.eval_shape(lambda s, b: self._loss(s.params, b, micro_rng(s, 0))[1], state, batch)
        replicated = self._replicated
        self._acc_shardings = Accumulator(
            grads=self.shardings.params,
            numerator=replicated,
            denominator=replicated,
            metrics={name: replicated for name in out.metrics},
        )
        metric_names = tuple(out.metrics)

        def zeros(params):
            return Accumulator(
                grads=jax.tree.map(lambda p: jnp.zeros(p.shape, jnp.float32), params),
                numerator=jnp.zeros((), jnp.float32),
                denominator=jnp.zeros((), jnp.float32),
                metrics={name: jnp.zeros((), jnp.float32) for name in metric_names},
            )

        self._zeros = jax.jit(zeros, out_shardings=self._acc_shardings)
        self._accumulate = jax.jit(self._accumulate_fn, out_shardings=self._acc_shardings, donate_argnums=(1,))
        self._apply = jax.jit(
            self._apply_fn, out_shardings=(self.shardings, replicated), donate_argnums=(0,)
        )

    def _accumulate_fn(self, state: TrainState, acc: Accumulator, batch: Batch, index: jax.Array) -> Accumulator:
        grads, out = jax.grad(self._loss, has_aux=True)(state.params, batch, micro_rng(state, index))
        return Accumulator(
            grads=jax.tree.map(lambda a, g: a + g.astype(jnp.float32), acc.grads, grads),
            numerator=acc.numerator + out.numerator.astype(jnp.float32),
            denominator=acc.denominator + out.denominator.astype(jnp.float32),
            metrics={k: acc.metrics[k] + jnp.asarray(v, jnp.float32) for k, v in out.metrics.items()},
        )

    def _apply_fn(self, state: TrainState, acc: Accumulator) -> tuple[TrainState, dict[str, jax.Array]]:
        scale = 1.0 / jnp.maximum(acc.denominator, jnp.finfo(jnp.float32).tiny)
        grads = jax.tree.map(lambda g: g * scale, acc.grads)  # the mean gradient, float32
        updates, opt_state = self.optimizer.update(grads, state.opt_state, state.params)
        params = optax.apply_updates(state.params, updates)
        new_state = TrainState(step=state.step + 1, params=params, opt_state=opt_state, rng=state.rng)
        metrics = {
            "loss": loss_value(acc.numerator, acc.denominator),
            "grad_norm": global_norm(grads),
            "denominator": acc.denominator,
            **acc.metrics,
        }
        return new_state, metrics

    def _eval_fn(self, state: TrainState, batch: Batch) -> tuple[jax.Array, jax.Array, dict[str, jax.Array]]:
        out = self._loss(state.params, batch, micro_rng(state, 0))[1]
        return out.numerator, out.denominator, out.metrics
