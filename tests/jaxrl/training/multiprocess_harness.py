"""Running one script as several JAX processes of one run on the CPU (JAXRL_* variables, gloo collectives),
and comparing their results: shared by the multi-process tests."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

WORKER = Path(__file__).with_name("multiprocess_worker.py")
REPO_ROOT = Path(__file__).resolve().parents[3]
TIMEOUT_S = 240  # both runs together take 20-30 s on 2 CPU cores
# Tolerance for two runs of the same partitioned program whose cross-device sums (the gradient
# reductions) run in gloo across processes in one run and in XLA's in-process collectives in the other:
# float32 sums of the same 8 partial gradients in another order differ in the last bits, and Adam
# carries that into the parameters. 1e-6 of an array's largest magnitude is ~8 float32 ulps at its scale.
# (Measured: at most 1 ulp, 1.2e-7 on norm scales of ~1; losses and gradient norms bitwise equal.)
SCALED_TOLERANCE = 1e-6


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def run_workers(out_dir: Path, processes: int, devices_each: int, *args: str, worker: Path = WORKER
                ) -> list[dict[str, np.ndarray]]:
    """Starts `processes` workers (scripts that write OUT_DIR/process-<index>.npz) as one run and returns
    each one's results; fails with every stderr."""
    out_dir.mkdir()
    env = {key: value for key, value in os.environ.items() if not key.startswith("JAXRL_")}
    env |= {
        "JAX_PLATFORMS": "cpu",
        "JAX_CPU_COLLECTIVES_IMPLEMENTATION": "gloo",  # JAX's default; cross-process collectives need one
        "XLA_FLAGS": f"--xla_force_host_platform_device_count={devices_each}",
        "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH")])),
    }
    if processes > 1:
        env |= {"JAXRL_COORDINATOR_ADDRESS": f"127.0.0.1:{free_port()}", "JAXRL_NUM_PROCESSES": str(processes)}
    logs = [out_dir / f"stderr-{index}.txt" for index in range(processes)]
    workers = []
    for index, log in enumerate(logs):
        with open(log, "w") as stderr:
            extra = {"JAXRL_PROCESS_ID": str(index)} if processes > 1 else {}
            command = [sys.executable, str(worker), str(out_dir), *args]
            workers.append(subprocess.Popen(command, env=env | extra, stdout=stderr, stderr=subprocess.STDOUT))
    deadline = time.monotonic() + TIMEOUT_S
    # Poll all: when one fails the others would wait for it until JAX's own timeouts, so stop them.
    while time.monotonic() < deadline and not all(w.poll() == 0 for w in workers):
        if any(w.poll() not in (None, 0) for w in workers):
            break
        time.sleep(0.2)
    codes = []
    for worker in workers:
        if worker.poll() is None:
            worker.kill()
            worker.wait()
            codes.append("killed: still running after the other failed or the timeout")
        else:
            codes.append(worker.returncode)
    if codes != [0] * processes:
        report = "\n".join(f"--- process {i} ({code}):\n{_tail(log)}" for i, (code, log) in enumerate(zip(codes, logs)))
        pytest.fail(f"{processes} worker process(es) failed:\n{report}")
    return [dict(np.load(out_dir / f"process-{index}.npz")) for index in range(processes)]


def _tail(log: Path, lines: int = 40) -> str:
    kept = [line for line in log.read_text().splitlines() if not line.startswith("[Gloo]")]  # one line per peer
    return "\n".join(kept[-lines:])


def arrays(result: dict[str, np.ndarray], prefix: str) -> dict[str, np.ndarray]:
    """The state's arrays under `prefix` (trained, restored, foreign), keyed by their tree path."""
    return {key[len(prefix):]: value for key, value in result.items() if key.startswith(prefix + ".")}


def assert_close(actual: dict[str, np.ndarray], expected: dict[str, np.ndarray]) -> None:
    assert actual.keys() == expected.keys()
    for key, want in expected.items():
        scale = float(np.abs(want).max()) if want.size else 0.0
        np.testing.assert_allclose(actual[key], want, rtol=0, atol=SCALED_TOLERANCE * scale, err_msg=key)


def assert_equal(actual: dict[str, np.ndarray], expected: dict[str, np.ndarray]) -> None:
    assert actual.keys() == expected.keys() and len(expected) > 10
    for key, want in expected.items():
        np.testing.assert_array_equal(actual[key], want, err_msg=key)
