"""The generic loader: a stream of named HF tensors + a mapping table -> a (sharded) Transformer.

The model is first built abstractly (`nnx.eval_shape`, no memory); each tensor is transformed on
the host, checked against the expected shape, cast to the parameter dtype and placed straight into
its sharded device array (`jax.make_array_from_callback`: each process fills only the shards it can
address, so this also works across hosts). Unknown, missing or misshapen tensors are errors.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import jax
import numpy as np
from flax import nnx
from jax.sharding import Mesh

from jaxrl import sharding as shd
from jaxrl.checkpoint.mapping import HF_IGNORED, HF_RULES, map_source, nnx_name, nnx_path
from jaxrl.models.config import ModelConfig
from jaxrl.models.transformer import Transformer

# (HF tensor name, a thunk that reads it as a numpy array in the torch layout)
TensorSource = Iterable[tuple[str, Callable[[], np.ndarray]]]


def abstract_model(config: ModelConfig) -> tuple[nnx.GraphDef, nnx.State]:
    """Graph definition and shape-only state of a model, without allocating weights."""
    return nnx.split(nnx.eval_shape(lambda: Transformer(config, rngs=nnx.Rngs(0))))


def place(array: np.ndarray, variable: nnx.Variable, mesh: Mesh | None) -> jax.Array:
    """A host array as a device array laid out by the variable's declared spec."""
    if mesh is None:
        return jax.device_put(array)
    sharding = shd.named_sharding(mesh, shd.variable_spec(variable), array.shape)
    return jax.make_array_from_callback(array.shape, sharding, lambda index: array[index])


def build_model(config: ModelConfig, tensors: TensorSource, mesh: Mesh | None = None) -> Transformer:
    """Assembles a Transformer from HF-named tensors through the family's mapping table."""
    rules = HF_RULES[config.family]
    graphdef, abstract_state = abstract_model(config)
    expected = {nnx_name(path): variable for path, variable in nnx.to_flat_state(abstract_state)}
    loaded: dict[str, nnx.Variable] = {}
    for name, read in tensors:
        if HF_IGNORED.match(name):
            continue
        mapped = map_source(rules, name)
        if mapped is None:
            raise ValueError(f"checkpoint tensor {name!r} has no mapping for the {config.family} family")
        target, rule = mapped
        if target not in expected:
            if name == "lm_head.weight" and config.tie_embeddings:
                continue  # some tied checkpoints store a copy of the embedding
            raise ValueError(f"checkpoint tensor {name!r} maps to {target!r}, which this config does not have")
        if target in loaded:
            raise ValueError(f"checkpoint provides {target!r} twice")
        variable = expected[target]
        array = np.asarray(rule.forward(read(), config))
        if array.shape != variable.get_value().shape:
            raise ValueError(
                f"{name}: shape {array.shape} after mapping, the model expects {variable.get_value().shape} for {target}"
            )
        array = np.ascontiguousarray(array.astype(variable.get_value().dtype))
        loaded[target] = variable.replace(place(array, variable, mesh))
    missing = sorted(set(expected) - set(loaded))
    if missing:
        raise ValueError(f"checkpoint lacks {len(missing)} weights, e.g. {missing[:5]}")
    state = nnx.from_flat_state([(nnx_path(name), loaded[name]) for name in expected])
    return nnx.merge(graphdef, state)
