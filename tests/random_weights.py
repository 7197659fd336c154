"""Random models for tests whose comparisons need every parameter to matter."""

from __future__ import annotations

import jax
from flax import nnx

from jaxrl.models import Transformer


def random_model(config, seed: int = 0) -> Transformer:
    """Random weights with norms away from 1 and std 0.15, so every parameter influences the logits and
    they spread widely (greedy choices far from ties)."""
    model = Transformer(config, rngs=nnx.Rngs(seed))
    state = nnx.state(model)
    leaves, treedef = jax.tree.flatten(state)
    keys = jax.random.split(jax.random.key(seed + 1), len(leaves))
    leaves = [
        (1.0 + 0.2 * jax.random.normal(k, x.shape)) if x.ndim == 1 else 0.15 * jax.random.normal(k, x.shape)
        for k, x in zip(keys, leaves)
    ]
    nnx.update(model, jax.tree.unflatten(treedef, leaves))
    return model
