"""Device mesh and sharding helpers (axes `data`, `fsdp`, `tensor`).

Specs are declared once per model family (`jaxrl.models.config.ShardingConfig`, attached to each
parameter as NNX `out_sharding` metadata) and fitted to the mesh at hand by `fit_spec`: an axis the
mesh lacks, or whose size does not divide the dimension, is dropped (that dimension is replicated
over it). The same config therefore runs on 1 device, on 8 fake CPU devices in tests, and on
several hosts. For several hosts call `jax.distributed.initialize()` before `make_mesh` (the CLI does,
through `jaxrl.distributed`): the mesh then spans every process's devices, and the loaders in
`jaxrl.checkpoint` fill only the shards each process can address.

Activations are constrained with `constrain` only while a mesh is set (`with jax.set_mesh(mesh):`);
without one the model runs unsharded and unconstrained.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import Any

import jax
import numpy as np
from flax import nnx
from jax.sharding import AxisType, Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

AXES = ("data", "fsdp", "tensor")


@dataclasses.dataclass(frozen=True)
class MeshConfig:
    """Axis sizes; exactly one may be -1 ("fill with the remaining devices")."""

    data: int = 1
    fsdp: int = -1
    tensor: int = 1

    def __post_init__(self):
        sizes = self.sizes
        if any(s == 0 or s < -1 for s in sizes):
            raise ValueError(f"mesh axis sizes must be positive or -1, got {dict(zip(AXES, sizes))}")
        if sizes.count(-1) > 1:
            raise ValueError(f"at most one mesh axis may be -1, got {dict(zip(AXES, sizes))}")

    @property
    def sizes(self) -> tuple[int, int, int]:
        return (self.data, self.fsdp, self.tensor)

    def resolve(self, num_devices: int) -> tuple[int, int, int]:
        """Concrete axis sizes for `num_devices` devices."""
        sizes = list(self.sizes)
        fixed = math.prod(s for s in sizes if s != -1)
        if -1 in sizes:
            if num_devices % fixed:
                raise ValueError(f"{num_devices} devices cannot be split as {dict(zip(AXES, sizes))}")
            sizes[sizes.index(-1)] = num_devices // fixed
        elif fixed != num_devices:
            raise ValueError(f"mesh {dict(zip(AXES, sizes))} needs {fixed} devices, {num_devices} available")
        return tuple(sizes)  # type: ignore[return-value]


def make_mesh(config: MeshConfig | None = None, devices: Sequence[jax.Device] | None = None) -> Mesh:
    """A mesh over `devices` (default: all devices of all processes) with Auto axis types."""
    config = config or MeshConfig()
    devices = list(jax.devices() if devices is None else devices)
    shape = config.resolve(len(devices))
    return jax.make_mesh(shape, AXES, axis_types=(AxisType.Auto,) * len(AXES), devices=devices)


def single_device_mesh() -> Mesh:
    """A 1x1x1 mesh on the first device (what `mesh=None` means for the loaders)."""
    return make_mesh(MeshConfig(1, 1, 1), devices=jax.devices()[:1])


def fit_spec(spec: P, shape: Sequence[int], axis_sizes: dict[str, int]) -> P:
    """`spec` restricted to axes present in the mesh whose sizes divide the dimension."""
    if len(spec) > len(shape):
        raise ValueError(f"spec {spec} has more entries than the array has dimensions {tuple(shape)}")
    fitted: list[Any] = []
    for dim, entry in zip(shape, tuple(spec) + (None,) * (len(shape) - len(spec))):
        names = () if entry is None else (entry,) if isinstance(entry, str) else tuple(entry)
        kept: list[str] = []
        for name in names:
            size = axis_sizes.get(name)
            if size is not None and dim % (math.prod(axis_sizes[n] for n in kept) * size) == 0:
                kept.append(name)
        fitted.append(None if not kept else kept[0] if len(kept) == 1 else tuple(kept))
    while fitted and fitted[-1] is None:
        fitted.pop()
    return P(*fitted)


def named_sharding(mesh: Mesh, spec: P, shape: Sequence[int]) -> NamedSharding:
    return NamedSharding(mesh, fit_spec(spec, shape, dict(mesh.shape)))


def _is_variable(x: Any) -> bool:
    return isinstance(x, nnx.Variable)


def variable_spec(variable: nnx.Variable) -> P:
    """The PartitionSpec a Variable declares through its `out_sharding` metadata (P() if none)."""
    spec = variable.get_metadata().get("out_sharding")
    return P() if spec is None else P(*spec)


def state_shardings(state: nnx.State, mesh: Mesh) -> nnx.State:
    """A tree like `state` whose Variables hold the NamedSharding of each value on `mesh`."""
    return jax.tree.map(
        lambda v: v.replace(named_sharding(mesh, variable_spec(v), v.get_value().shape)), state, is_leaf=_is_variable
    )


def shard_state(state: nnx.State, mesh: Mesh) -> nnx.State:
    """Places every Variable of `state` by its declared spec."""
    return jax.tree.map(
        lambda v: v.replace(jax.device_put(v.get_value(), named_sharding(mesh, variable_spec(v), v.get_value().shape))),
        state,
        is_leaf=_is_variable,
    )


def shard_model(model: nnx.Module, mesh: Mesh) -> nnx.Module:
    """Reshards a model's variables in place by their declared specs; returns the model."""
    nnx.update(model, shard_state(nnx.state(model), mesh))
    return model


def shard_array(x: Any, mesh: Mesh, spec: P) -> jax.Array:
    """Places a host array (the same on every process) on `mesh` by `spec`, fitted to its shape."""
    x = np.asarray(x) if not isinstance(x, jax.Array) else x
    sharding = named_sharding(mesh, spec, x.shape)
    if isinstance(x, jax.Array):
        return jax.device_put(x, sharding)
    return jax.make_array_from_callback(x.shape, sharding, lambda index: x[index])


def constrain(x: jax.Array, spec: P) -> jax.Array:
    """`with_sharding_constraint` under the mesh set by `jax.set_mesh`; identity without one."""
    mesh = jax.sharding.get_abstract_mesh()
    if mesh.empty:
        return x
    return jax.lax.with_sharding_constraint(x, fit_spec(spec, x.shape, dict(mesh.shape)))
