"""The per-role CPU sampler: a long-lived CUDA role's time is also split by thread."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from benchmark_scripts import load_benchmark

process_cpu = load_benchmark("process_cpu")

# A child named like an executor whose main thread and a thread named `spinner` each burn CPU outside the GIL
# (hashing large buffers releases it), one after the other.
CHILD = textwrap.dedent("""
    import ctypes, hashlib, threading, time
    libc = ctypes.CDLL(None)
    libc.prctl(15, b"trl-executor", 0, 0, 0)  # PR_SET_NAME: the process (main thread) is the executor

    def burn(seconds):
        data, until = b"x" * (1 << 20), time.process_time() + seconds
        while time.process_time() < until:
            hashlib.sha256(data).digest()

    def spinner():
        libc.prctl(15, b"spinner", 0, 0, 0)
        burn(0.4)

    thread = threading.Thread(target=spinner)
    thread.start()
    thread.join()
    burn(0.4)
    print("done", flush=True)
    input()
""")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_an_executors_cpu_is_split_between_its_main_thread_and_its_named_threads():
    roles = process_cpu.RoleCPU(os.getpid(), interval_s=0.02)
    child = subprocess.Popen([sys.executable, "-c", CHILD], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "done"
        out = roles.stop()
    finally:
        child.communicate("\n", timeout=10)
    assert out["executor:spinner"] == pytest.approx(0.4, abs=0.15)
    assert out["executor:main thread"] >= 0.3
    assert out["executor:main thread"] + out["executor:spinner"] == pytest.approx(out["executor"], abs=0.05)


def test_threads_of_a_process_that_is_gone_are_none():
    assert process_cpu.thread_cpu(2 ** 22 + 12345) == {}
