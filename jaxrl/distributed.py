"""Joining a multi-process (multi-host) run, as the environment asks: one command line for one host or many.

A run on several hosts starts the same command once per host (one process per host, each seeing all
of its accelerators); `initialize_from_env` then calls `jax.distributed.initialize`, after which
`jax.devices()` lists every process's devices and the mesh of `jaxrl.sharding.make_mesh` spans them.
It must run before anything uses a JAX backend. Two ways to ask for it:

- explicit: JAXRL_COORDINATOR_ADDRESS (host:port of process 0, reachable from every host),
  JAXRL_NUM_PROCESSES and JAXRL_PROCESS_ID (0 .. n-1, distinct per process), all three or none;
- JAXRL_DISTRIBUTED=auto: JAX detects them from the cluster (Slurm, Open MPI, Kubernetes, Cloud TPU).
  Opt-in, because a plain shell inside a Slurm allocation looks like a cluster too. JAX's Slurm
  detection assumes one process per GPU (it makes only GPU SLURM_LOCALID visible) unless
  JAXRL_LOCAL_DEVICE_IDS says otherwise.

JAXRL_LOCAL_DEVICE_IDS (optional, either way): comma-separated GPU ids this process may use.
With none of these set, nothing happens: a single-process run.
On CPU, cross-process collectives use gloo (JAX's default `jax_cpu_collectives_implementation`).
"""

from __future__ import annotations

import dataclasses
import logging
import os
from collections.abc import Mapping

from jaxrl.config import ConfigError

log = logging.getLogger(__name__)

COORDINATOR = "JAXRL_COORDINATOR_ADDRESS"
NUM_PROCESSES = "JAXRL_NUM_PROCESSES"
PROCESS_ID = "JAXRL_PROCESS_ID"
LOCAL_DEVICE_IDS = "JAXRL_LOCAL_DEVICE_IDS"
MODE = "JAXRL_DISTRIBUTED"
EXPLICIT = (COORDINATOR, NUM_PROCESSES, PROCESS_ID)


@dataclasses.dataclass(frozen=True)
class DistributedSettings:
    """The arguments of `jax.distributed.initialize`; None lets JAX detect a value (auto mode only)."""

    coordinator_address: str | None = None
    num_processes: int | None = None
    process_id: int | None = None
    local_device_ids: tuple[int, ...] | None = None


def settings_from_env(env: Mapping[str, str]) -> DistributedSettings | None:
    """The settings `env` asks for, None for a single-process run; ConfigError for partial or bad values."""
    env = {key: value for key, value in env.items() if value != ""}  # `VAR= cmd` means unset
    mode = env.get(MODE)
    given = [name for name in EXPLICIT if name in env]
    local = _device_ids(env[LOCAL_DEVICE_IDS]) if LOCAL_DEVICE_IDS in env else None
    if mode is not None:
        if mode != "auto":
            raise ConfigError(f"{MODE}={mode!r}: the only value is 'auto' (or set {', '.join(EXPLICIT)})")
        if given:
            raise ConfigError(f"{MODE}=auto detects the processes itself: unset {', '.join(given)}")
        return DistributedSettings(local_device_ids=local)
    if not given:
        if local is not None:
            raise ConfigError(f"{LOCAL_DEVICE_IDS} is set but no multi-process run is: set {', '.join(EXPLICIT)}"
                              f" or {MODE}=auto")
        return None
    missing = [name for name in EXPLICIT if name not in env]
    if missing:
        raise ConfigError(f"a multi-process run needs {', '.join(EXPLICIT)} together; missing {', '.join(missing)}")
    num_processes = _integer(env, NUM_PROCESSES, minimum=1)
    process_id = _integer(env, PROCESS_ID, minimum=0)
    if process_id >= num_processes:
        raise ConfigError(f"{PROCESS_ID}={process_id} is out of range for {NUM_PROCESSES}={num_processes}"
                          f" (ids are 0 .. {num_processes - 1})")
    return DistributedSettings(_address(env[COORDINATOR]), num_processes, process_id, local)


def initialize_from_env(env: Mapping[str, str] | None = None) -> bool:
    """Calls `jax.distributed.initialize` when `env` (default: os.environ) asks for it; True if it did."""
    settings = settings_from_env(os.environ if env is None else env)
    if settings is None:
        return False
    import jax

    local = None if settings.local_device_ids is None else list(settings.local_device_ids)
    auto = settings.coordinator_address is None
    try:
        jax.distributed.initialize(settings.coordinator_address, settings.num_processes, settings.process_id,
                                   local_device_ids=local)
    except ValueError as exc:  # auto mode outside a cluster JAX knows: "coordinator_address should be defined"
        if not auto:
            raise
        raise ConfigError(f"{MODE}=auto: JAX found no cluster environment to join ({exc})") from exc
    log.info("joined a run of %d processes as process %d", jax.process_count(), jax.process_index())
    return True


def _integer(env: Mapping[str, str], name: str, minimum: int) -> int:
    try:
        value = int(env[name])
    except ValueError:
        raise ConfigError(f"{name}={env[name]!r} is not an integer") from None
    if value < minimum:
        raise ConfigError(f"{name}={value} must be >= {minimum}")
    return value


def _address(value: str) -> str:
    """`host:port` (an IPv6 host in brackets), checked so a typo fails here and not in a 5-minute timeout."""
    host, _, port = value.rpartition(":")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ConfigError(f"{COORDINATOR}={value!r} must be host:port, e.g. 10.0.0.1:1234")
    return value


def _device_ids(value: str) -> tuple[int, ...]:
    parts = [part.strip() for part in value.split(",")]
    ids = tuple(int(part) for part in parts if part.isdigit())
    if len(ids) != len(parts) or len(set(ids)) != len(ids):
        raise ConfigError(f"{LOCAL_DEVICE_IDS}={value!r} must be distinct device ids separated by commas, e.g. 0,1,2,3")
    return ids
