"""The per-role CPU sampler: a long-lived CUDA role's time is also split by thread."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time

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


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_a_process_whose_name_is_not_utf8_is_read_not_fatal():
    """Any process on the machine may name itself; the sampler reads them all."""
    named = subprocess.Popen([sys.executable, "-c", "import ctypes, time; "
                              "ctypes.CDLL(None).prctl(15, b'odd-\\xff) x', 0, 0, 0); time.sleep(30)"])
    try:
        time.sleep(0.5)
        name, fields = process_cpu.stat_fields(named.pid)
        assert name.startswith("odd-") and fields[0] in "RSD"
        assert list(process_cpu.thread_cpu(named.pid).values())[0][0].startswith("odd-")
    finally:
        named.kill()
        named.wait()
