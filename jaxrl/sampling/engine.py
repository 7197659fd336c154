"""Jitted batched prefill and KV-cache decode over token arrays (the device half of the sampler).

    engine = DecodeEngine(model, mesh=None)
    args = DecodeArgs.of(temperature, top_k, top_p, stop_ids, max_new_tokens)
    state = engine.prefill(tokens, segments, active, keys, args, mode=mode_for(...), cache_len=S)
    state = engine.decode(state, max_new_tokens, args, mode=mode)   # state.tokens[:, :state.lengths]

Rows are left-padded to a common prompt length P (segment 0 = padding), so every row's last prompt
token sits in slot P - 1 and generated token j goes to slot P + j: one cache index for the whole
batch. `prefill` runs the prompt through the model into a fresh cache of `cache_len` slots and draws
token 0; `decode` is a `lax.while_loop` that feeds token s - 1 and draws token s until `until`
tokens exist or every row is done, so one compiled program serves any number of steps, and can be
resumed (the sampler stops between chunks to check stop strings on the host). Each function
compiles once per (batch, prompt length, cache length, mode, stop-id slots); `num_compilations`
counts them (via jit's `_cache_size`).

A row is done after a stop token (which is kept: it counts in `lengths`), after `max_new_tokens`, or
when the host says so; done rows keep stepping with the batch but their outputs are masked to 0.
The model runs through the functional split/merge pattern (`nnx.split` once, `nnx.merge` inside the
traced function), so calls do not walk the module graph. With a mesh, the weights keep their own
sharding, the cache follows the config's `cache_bskh` / `cache_bs` specs, every per-row array is
split over the batch axes, and calls run under `jax.set_mesh` so the model's activation
constraints apply.
"""

from __future__ import annotations

import contextlib
import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx
from jax.experimental import multihost_utils
from jax.sharding import Mesh
from jax.sharding import PartitionSpec as P

from jaxrl import sharding as shd
from jaxrl.models.cache import KVCache, LayerCache, init_cache
from jaxrl.models.config import BATCH
from jaxrl.models.transformer import Transformer
from jaxrl.sampling.logits import SamplingArgs, draw

ROW = P(BATCH)
ROW_2D = P(BATCH, None)


@jax.tree_util.register_dataclass
@dataclasses.dataclass
class DecodeArgs:
    """Traced per-call settings: sampling knobs, stop token ids (-1 = unused slot), token budget."""

    sampling: SamplingArgs
    stop_ids: jax.Array  # [K] int32
    max_new_tokens: jax.Array  # int32 scalar

    @classmethod
    def of(cls, temperature: float, top_k: int, top_p: float, stop_ids, max_new_tokens: int, slots: int = 8):
        """`stop_ids` padded with -1 to a multiple of `slots` (so a different stop set rarely recompiles)."""
        stop_ids = sorted(set(int(i) for i in stop_ids))
        if any(i < 0 for i in stop_ids):
            raise ValueError(f"stop token ids must be >= 0, got {stop_ids}")
        width = max(slots, -(-len(stop_ids) // slots) * slots)
        padded = np.full((width,), -1, np.int32)
        padded[: len(stop_ids)] = stop_ids
        return cls(SamplingArgs.of(temperature, top_k, top_p), jnp.asarray(padded), jnp.int32(max_new_tokens))


@jax.tree_util.register_dataclass
@dataclasses.dataclass
class DecodeState:
    """Everything the decode loop carries; `tokens`/`logprobs` hold the generated tokens only."""

    cache: KVCache
    tokens: jax.Array  # [B, N] int32, N = cache_len - P + 1 (the most a row can generate)
    logprobs: jax.Array  # [B, N] float32
    lengths: jax.Array  # [B] int32: tokens generated, a final stop token included
    done: jax.Array  # [B] bool
    positions: jax.Array  # [B] int32: position of the newest token (the next input)
    keys: jax.Array  # [B, 2] uint32: per-row PRNG key data
    step: jax.Array  # int32 scalar: tokens generated so far by every unfinished row

    @property
    def capacity(self) -> int:
        return self.tokens.shape[1]


class DecodeEngine:
    """Compiled prefill and decode for one model (weights can be swapped with `update`).

    attention_impl overrides the model config's attention path for sampling only (e.g. "reference"
    for a model trained with "fast"): the weights are shared, only the traced graph differs.
    """

    def __init__(self, model: Transformer, mesh: Mesh | None = None, *, attention_impl: str | None = None):
        self.config = model.config if attention_impl is None else model.config.replace(attention_impl=attention_impl)
        self.mesh = mesh
        if attention_impl is None:
            self.graphdef, self.params = nnx.split(model)
        else:
            self.graphdef = nnx.split(nnx.eval_shape(lambda: Transformer(self.config, rngs=nnx.Rngs(0))))[0]
            self.params = nnx.state(model)
        self._prefill = jax.jit(self._prefill_fn, static_argnames=("mode", "cache_len"))
        self._decode = jax.jit(self._decode_fn, static_argnames=("mode",), donate_argnames=("state",))

    def update(self, model: Transformer) -> None:
        """Sample from `model`'s current weights (same architecture) from now on."""
        self.params = nnx.state(model)

    def num_compilations(self) -> int:
        """Programs compiled so far (prefill + decode), for checking that shapes stay in their buckets."""
        return self._prefill._cache_size() + self._decode._cache_size()

    # ------------------------------------------------------------------ host entry points

    def prefill(
        self,
        tokens: np.ndarray,
        segments: np.ndarray,
        active: np.ndarray,
        keys: jax.Array,
        args: DecodeArgs,
        *,
        mode: str,
        cache_len: int,
    ) -> DecodeState:
        """Left-padded tokens/segments [B, P] (segment 1 = prompt token, 0 = padding), active [B]
        (False for filler rows), typed PRNG keys [B]; returns the state after token 0 was drawn."""
        tokens, segments, active = np.asarray(tokens), np.asarray(segments), np.asarray(active)
        if tokens.ndim != 2 or segments.shape != tokens.shape or active.shape != tokens.shape[:1]:
            raise ValueError(f"tokens/segments must be [B, P] and active [B], got {tokens.shape}, "
                             f"{segments.shape}, {active.shape}")
        if keys.shape != active.shape:
            raise ValueError(f"one PRNG key per row expected, got {keys.shape} for {active.shape[0]} rows")
        prompt_len = tokens.shape[1]
        capacity = cache_len - prompt_len + 1
        if capacity < 1:
            raise ValueError(f"cache_len {cache_len} is shorter than the {prompt_len}-token prompt")
        if not 1 <= int(args.max_new_tokens) <= capacity:
            raise ValueError(f"max_new_tokens must be in [1, {capacity}] for cache_len {cache_len} and prompt "
                             f"length {prompt_len}, got {int(args.max_new_tokens)}")
        rows = (
            self._place(tokens.astype(np.int32), ROW_2D),
            self._place(segments.astype(np.int32), ROW_2D),
            self._place(active.astype(bool), ROW),
            self._place(np.asarray(jax.random.key_data(keys)), ROW_2D),
        )
        with self._mesh_context():
            return self._prefill(self.params, *rows, args, mode=mode, cache_len=cache_len)

    def decode(self, state: DecodeState, until: int, args: DecodeArgs, *, mode: str) -> DecodeState:
        """Decodes until `until` tokens exist per row (at most the state's capacity) or all rows are
        done. `state` is donated: use only the returned one."""
        if not 1 <= until <= state.capacity:
            raise ValueError(f"until must be in [1, {state.capacity}], got {until}")
        with self._mesh_context():
            return self._decode(self.params, state, jnp.int32(until), args, mode=mode)

    def mark_done(self, state: DecodeState, done: np.ndarray) -> DecodeState:
        """The state with rows ended by the host (e.g. a stop string) marked done, same placement."""
        (current,) = host_values(state.done)
        return dataclasses.replace(state, done=jax.device_put(current | np.asarray(done, bool), state.done.sharding))

    def _place(self, array: np.ndarray, spec: P) -> jax.Array:
        return jnp.asarray(array) if self.mesh is None else shd.shard_array(array, self.mesh, spec)

    def _mesh_context(self):
        return contextlib.nullcontext() if self.mesh is None else jax.set_mesh(self.mesh)

    # ------------------------------------------------------------------ traced functions

    def _prefill_fn(self, params, tokens, segments, active, key_data, args: DecodeArgs, *, mode: str, cache_len: int):
        model = nnx.merge(self.graphdef, params)
        batch, prompt_len = tokens.shape
        positions = jnp.maximum(jnp.cumsum(segments, axis=1) - 1, 0)
        cache = init_cache(self.config, batch, cache_len)
        hidden, cache = model.hidden_states(tokens, positions, segment_ids=segments, cache=cache, cache_index=0)
        logits = model.logits(hidden[:, -1])
        token, logprob = draw(logits, _step_keys(key_data, 0), args.sampling, mode)
        token, logprob = jnp.where(active, token, 0), jnp.where(active, logprob, 0.0)
        capacity = cache_len - prompt_len + 1
        state = DecodeState(
            cache=cache,
            tokens=jnp.zeros((batch, capacity), jnp.int32).at[:, 0].set(token),
            logprobs=jnp.zeros((batch, capacity), jnp.float32).at[:, 0].set(logprob),
            lengths=active.astype(jnp.int32),
            done=~active | _is_stop(token, args.stop_ids) | (args.max_new_tokens <= 1),
            positions=positions[:, -1] + 1,
            keys=key_data,
            step=jnp.int32(1),
        )
        return self._constrain(state)

    def _decode_fn(self, params, state: DecodeState, until, args: DecodeArgs, *, mode: str):
        model = nnx.merge(self.graphdef, params)
        batch, capacity = state.tokens.shape
        first_slot = state.cache.max_len - capacity  # slot of token 0 minus one = P - 1
        ones = jnp.ones((batch, 1), jnp.int32)

        def cond(st: DecodeState):
            return (st.step < until) & ~jnp.all(st.done)

        def body(st: DecodeState):
            step = st.step
            previous = jax.lax.dynamic_slice_in_dim(st.tokens, step - 1, 1, axis=1)
            hidden, cache = model.hidden_states(
                previous, st.positions[:, None], segment_ids=ones, cache=st.cache, cache_index=first_slot + step
            )
            token, logprob = draw(model.logits(hidden[:, 0]), _step_keys(st.keys, step), args.sampling, mode)
            running = ~st.done
            token, logprob = jnp.where(running, token, 0), jnp.where(running, logprob, 0.0)
            new = DecodeState(
                cache=cache,
                tokens=jax.lax.dynamic_update_slice_in_dim(st.tokens, token[:, None], step, axis=1),
                logprobs=jax.lax.dynamic_update_slice_in_dim(st.logprobs, logprob[:, None], step, axis=1),
                lengths=st.lengths + running.astype(jnp.int32),
                done=st.done | (running & _is_stop(token, args.stop_ids)) | (step + 1 >= args.max_new_tokens),
                positions=st.positions + 1,
                keys=st.keys,
                step=step + 1,
            )
            return self._constrain(new)

        return self._constrain(jax.lax.while_loop(cond, body, self._constrain(state)))

    def _constrain(self, state: DecodeState) -> DecodeState:
        """Fixed shardings for the carried state, so prefill's output is decode's input layout (a
        different layout would compile decode again)."""
        spec = self.config.sharding
        cache = KVCache(
            layers=tuple(
                LayerCache(k=shd.constrain(layer.k, spec.cache_bskh), v=shd.constrain(layer.v, spec.cache_bskh))
                for layer in state.cache.layers
            ),
            segment_ids=shd.constrain(state.cache.segment_ids, spec.cache_bs),
        )
        return DecodeState(
            cache=cache,
            tokens=shd.constrain(state.tokens, ROW_2D),
            logprobs=shd.constrain(state.logprobs, ROW_2D),
            lengths=shd.constrain(state.lengths, ROW),
            done=shd.constrain(state.done, ROW),
            positions=shd.constrain(state.positions, ROW),
            keys=shd.constrain(state.keys, ROW_2D),
            step=shd.constrain(state.step, P()),
        )


def host_values(*arrays: jax.Array) -> tuple[np.ndarray, ...]:
    """The arrays' full values on this host. Rows split across processes (a mesh over several hosts) are
    gathered, so every process holds every row: the same completions on every process."""
    return tuple(np.asarray(jax.device_get(x)) if x.is_fully_addressable or x.is_fully_replicated
                 else multihost_utils.process_allgather(x, tiled=True) for x in arrays)


def _step_keys(key_data: jax.Array, step) -> jax.Array:
    """Row keys for one step: independent of the batch a row lands in and of chunking."""
    keys = jax.random.wrap_key_data(key_data)
    return jax.vmap(lambda key: jax.random.fold_in(key, step))(keys)


def _is_stop(token: jax.Array, stop_ids: jax.Array) -> jax.Array:
    return jnp.any(token[:, None] == stop_ids[None, :], axis=-1)
