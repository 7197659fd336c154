"""Which JAXRL_* variables start a multi-process run, and the errors for partial or bad ones.
(tests/jaxrl/training/test_multiprocess.py runs two real processes.)"""

from __future__ import annotations

import jax
import pytest

from jaxrl import distributed
from jaxrl.config import ConfigError
from jaxrl.distributed import DistributedSettings, initialize_from_env, settings_from_env

EXPLICIT = {"JAXRL_COORDINATOR_ADDRESS": "10.0.0.1:1234", "JAXRL_NUM_PROCESSES": "4", "JAXRL_PROCESS_ID": "3"}


def test_without_the_variables_a_run_is_single_process():
    assert settings_from_env({}) is None
    assert settings_from_env({"SLURM_JOB_ID": "7", "SLURM_NTASKS": "2", "JAX_COORDINATOR_ADDRESS": "h:1"}) is None
    assert settings_from_env({name: "" for name in EXPLICIT}) is None  # `VAR= command` unsets a variable


def test_explicit_variables():
    assert settings_from_env(EXPLICIT) == DistributedSettings("10.0.0.1:1234", 4, 3)
    assert settings_from_env(EXPLICIT | {"JAXRL_LOCAL_DEVICE_IDS": "0, 1,2,3"}).local_device_ids == (0, 1, 2, 3)
    assert settings_from_env(EXPLICIT | {"JAXRL_COORDINATOR_ADDRESS": "[::1]:80"}).coordinator_address == "[::1]:80"


def test_auto_leaves_the_processes_to_jax_cluster_detection():
    assert settings_from_env({"JAXRL_DISTRIBUTED": "auto"}) == DistributedSettings()
    settings = settings_from_env({"JAXRL_DISTRIBUTED": "auto", "JAXRL_LOCAL_DEVICE_IDS": "0,1"})
    assert settings == DistributedSettings(local_device_ids=(0, 1))


@pytest.mark.parametrize(
    "env, message",
    [
        ({"JAXRL_NUM_PROCESSES": "2"}, "missing JAXRL_COORDINATOR_ADDRESS, JAXRL_PROCESS_ID"),
        (EXPLICIT | {"JAXRL_PROCESS_ID": "4"}, "JAXRL_PROCESS_ID=4 is out of range for JAXRL_NUM_PROCESSES=4"),
        (EXPLICIT | {"JAXRL_PROCESS_ID": "-1"}, "JAXRL_PROCESS_ID=-1 must be >= 0"),
        (EXPLICIT | {"JAXRL_NUM_PROCESSES": "0"}, "JAXRL_NUM_PROCESSES=0 must be >= 1"),
        (EXPLICIT | {"JAXRL_NUM_PROCESSES": "two"}, "JAXRL_NUM_PROCESSES='two' is not an integer"),
        (EXPLICIT | {"JAXRL_COORDINATOR_ADDRESS": "10.0.0.1"}, "must be host:port"),
        (EXPLICIT | {"JAXRL_COORDINATOR_ADDRESS": ":1234"}, "must be host:port"),
        (EXPLICIT | {"JAXRL_COORDINATOR_ADDRESS": "host:70000"}, "must be host:port"),
        (EXPLICIT | {"JAXRL_LOCAL_DEVICE_IDS": "0,0"}, "must be distinct device ids"),
        (EXPLICIT | {"JAXRL_LOCAL_DEVICE_IDS": "gpu0"}, "must be distinct device ids"),
        ({"JAXRL_LOCAL_DEVICE_IDS": "0"}, "no multi-process run is"),
        ({"JAXRL_DISTRIBUTED": "slurm"}, "the only value is 'auto'"),
        (EXPLICIT | {"JAXRL_DISTRIBUTED": "auto"}, "unset JAXRL_COORDINATOR_ADDRESS, JAXRL_NUM_PROCESSES"),
    ],
)
def test_partial_or_bad_variables_are_config_errors(env, message):
    with pytest.raises(ConfigError, match=message.replace("[", r"\[")):
        settings_from_env(env)


@pytest.fixture
def initialize_calls(monkeypatch):
    """Records jax.distributed.initialize calls instead of joining a run."""
    calls = []
    monkeypatch.setattr(jax.distributed, "initialize", lambda *args, **kwargs: calls.append((args, kwargs)))
    return calls


def test_initialize_passes_the_settings_to_jax(initialize_calls):
    assert initialize_from_env(EXPLICIT | {"JAXRL_LOCAL_DEVICE_IDS": "2,3"})
    assert initialize_calls == [(("10.0.0.1:1234", 4, 3), {"local_device_ids": [2, 3]})]


def test_initialize_does_nothing_without_the_variables(initialize_calls, monkeypatch):
    for name in (*distributed.EXPLICIT, distributed.MODE, distributed.LOCAL_DEVICE_IDS):
        monkeypatch.delenv(name, raising=False)
    assert not initialize_from_env()  # os.environ
    assert not initialize_from_env({})
    assert initialize_calls == []


def test_auto_outside_a_known_cluster_says_so(monkeypatch):
    def no_cluster(*args, **kwargs):  # what jax.distributed.initialize raises when detection finds nothing
        raise ValueError("coordinator_address should be defined.")

    monkeypatch.setattr(jax.distributed, "initialize", no_cluster)
    with pytest.raises(ConfigError, match="JAXRL_DISTRIBUTED=auto: JAX found no cluster environment"):
        initialize_from_env({"JAXRL_DISTRIBUTED": "auto"})
