"""metrics.jsonl + TensorBoard logging: JAX/numpy scalars, non-finite values, resumed runs."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import pytest

from jaxrl.training.metrics_log import MetricsLogger, read_metrics, to_number


def test_lines_hold_plain_numbers_from_jax_and_numpy_scalars(tmp_path):
    with MetricsLogger(tmp_path) as logger:
        values = logger.log(1, {"train/loss": jnp.float32(2.5), "train/lr": 1e-5, "train/tokens": np.int64(7),
                                "train/bf16": jnp.asarray(0.5, jnp.bfloat16), "train/nan": jnp.nan})
    assert values["train/tokens"] == 7 and isinstance(values["train/tokens"], int)
    (record,) = read_metrics(tmp_path)
    assert record["step"] == 1 and record["time"] > 0
    assert record["train/loss"] == 2.5 and record["train/lr"] == 1e-5 and record["train/bf16"] == 0.5
    assert record["train/nan"] is None  # JSON has no NaN
    events = list((tmp_path / "tensorboard").iterdir())
    assert events and all(e.stat().st_size > 0 for e in events)


def test_non_scalars_are_refused():
    with pytest.raises(ValueError, match="scalar"):
        to_number(jnp.ones(3), "x")
    with pytest.raises(ValueError, match="scalar"):
        to_number("fast", "x")
    with pytest.raises(ValueError, match="scalar"):
        to_number(True, "x")


def test_resumed_run_drops_the_lines_written_after_its_checkpoint(tmp_path):
    with MetricsLogger(tmp_path, tensorboard=False) as logger:
        for step in (1, 2, 3, 4):
            logger.log(step, {"train/loss": float(step)})
        logger.log(4, {"eval/loss": 0.5})
    with MetricsLogger(tmp_path, start_step=2, tensorboard=False) as logger:
        logger.log(3, {"train/loss": 30.0})
    assert [(r["step"], r.get("train/loss")) for r in read_metrics(tmp_path)] == [(1, 1.0), (2, 2.0), (3, 30.0)]


def test_a_fresh_run_in_an_old_folder_starts_a_fresh_file_and_disabled_loggers_write_nothing(tmp_path):
    with MetricsLogger(tmp_path, tensorboard=False) as logger:
        logger.log(1, {"a": 1.0})
    with MetricsLogger(tmp_path, tensorboard=False) as logger:  # start_step 0
        logger.log(1, {"a": 2.0})
    assert [r["a"] for r in read_metrics(tmp_path)] == [2.0]
    quiet = tmp_path / "quiet"
    with MetricsLogger(quiet, enabled=False) as logger:
        assert logger.log(1, {"a": jnp.float32(3.0)}) == {"a": 3.0}
    assert not quiet.exists()
