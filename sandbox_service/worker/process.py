"""One isolated child process: own process group, scrubbed environment, private temp dir, bounded output.

The child is started ahead of need (it imports torch and Triton, then waits for its job on a pipe), is
used for exactly one evaluation, and is then killed with its whole process group. Nothing it prints is
interpreted: stdout/stderr are captured, bounded, and kept only for debugging.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from sandbox_service.worker import protocol

PACKAGE_ROOT = Path(__file__).resolve().parents[2]

# Variables a child may inherit; everything else (API keys, tokens, proxies) is dropped.
_INHERITED_ENV = (
    "LD_LIBRARY_PATH",
    "CUDA_HOME",
    "CUDA_PATH",
    "TRITON_PTXAS_PATH",
    "TRITON_LIBCUDA_PATH",
    "TRITON_HOME",
    "NCCL_NVLS_ENABLE",
    "TORCH_SYMM_MEM_DISABLE_MULTICAST",
    "NVSHMEM_DISABLE_NVLS",
)


@dataclasses.dataclass(frozen=True)
class ChildSpec:
    role: str  # "candidate" or "reference"
    backend: str  # "cuda" or "interpreter"
    gpu: int | None = None
    work_root: Path | None = None
    triton_cache_dir: Path | None = None
    output_limit_bytes: int = 64 * 1024
    cpu_threads: int = 1


class _BoundedOutput:
    """Keeps the head and tail of a stream and counts the rest; never grows without bound."""

    def __init__(self, limit: int):
        self.limit = limit
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0

    def feed(self, chunk: bytes) -> None:
        self.total += len(chunk)
        room = self.limit // 2 - len(self.head)
        if room > 0:
            self.head.extend(chunk[:room])
            chunk = chunk[room:]
        if chunk:
            self.tail.extend(chunk)
            del self.tail[: max(0, len(self.tail) - self.limit // 2)]

    def text(self) -> str:
        dropped = self.total - len(self.head) - len(self.tail)
        middle = f"\n... [{dropped} bytes of output dropped] ...\n" if dropped > 0 else ""
        return self.head.decode(errors="replace") + middle + self.tail.decode(errors="replace")


def _child_env(spec: ChildSpec, private_dir: Path) -> dict[str, str]:
    env = {k: os.environ[k] for k in _INHERITED_ENV if k in os.environ}
    env.update(
        PATH=f"{Path(sys.executable).parent}:/usr/local/bin:/usr/bin:/bin",
        HOME=str(private_dir),
        TMPDIR=str(private_dir),
        LANG="C.UTF-8",
        PYTHONPATH=str(PACKAGE_ROOT),
        PYTHONNOUSERSITE="1",
        PYTHONDONTWRITEBYTECODE="1",
        PYTHONHASHSEED="0",
        PYTHONUNBUFFERED="1",
        OMP_NUM_THREADS=str(spec.cpu_threads),
        MKL_NUM_THREADS=str(spec.cpu_threads),
        CUDA_VISIBLE_DEVICES="" if spec.gpu is None else str(spec.gpu),
        TRITON_CACHE_DIR=str(spec.triton_cache_dir or private_dir / "triton-cache"),
    )
    if spec.backend == "interpreter":
        env["TRITON_INTERPRET"] = "1"
    return env


class ChildProcess:
    """A started child. `receive()` reads its messages; `kill()` ends it and removes its files."""

    def __init__(self, spec: ChildSpec):
        self.spec = spec
        self.private_dir = Path(tempfile.mkdtemp(prefix=f"tritonrl-{spec.role}-", dir=spec.work_root))
        ctrl_read, self._ctrl_write = os.pipe()
        self._report_read, report_write = os.pipe()
        self.started_at = time.monotonic()
        try:
            self._popen = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "sandbox_service.worker.child_main",
                    spec.role,
                    spec.backend,
                    str(ctrl_read),
                    str(report_write),
                ],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                cwd=self.private_dir,
                env=_child_env(spec, self.private_dir),
                pass_fds=(ctrl_read, report_write),
                start_new_session=True,  # own session and process group: killpg reaches everything it starts
                close_fds=True,
            )
        finally:
            os.close(ctrl_read)
            os.close(report_write)
        self.pid = self._popen.pid
        self.receiver = protocol.Receiver(self._report_read)
        self._output = _BoundedOutput(spec.output_limit_bytes)
        self._reader = threading.Thread(target=self._drain, daemon=True)
        self._reader.start()
        self.memory_exceeded = False
        self._watchdog_stop = threading.Event()
        self._killed = False

    # -- output and memory ---------------------------------------------------------------------
    def _drain(self) -> None:
        stream = self._popen.stdout
        while True:
            chunk = stream.read1(65536) if hasattr(stream, "read1") else stream.read(65536)
            if not chunk:
                return
            self._output.feed(chunk)

    def output(self) -> str:
        return self._output.text()

    def rss_mb(self) -> float:
        try:
            with open(f"/proc/{self.pid}/status") as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        return int(line.split()[1]) / 1024
        except (FileNotFoundError, ProcessLookupError, PermissionError):
            pass
        return 0.0

    def watch_memory(self, limit_mb: int, interval_s: float = 0.1) -> None:
        """Kill the child once its resident memory passes the limit (CUDA forbids an address-space rlimit)."""

        def watch() -> None:
            while not self._watchdog_stop.wait(interval_s):
                if self.rss_mb() > limit_mb:
                    self.memory_exceeded = True
                    self.kill()
                    return

        threading.Thread(target=watch, daemon=True).start()

    # -- messages ------------------------------------------------------------------------------
    def send(self, message: dict) -> None:
        protocol.send(self._ctrl_write, message)

    def receive(self, timeout: float | None = None) -> dict:
        return self.receiver.receive(timeout)

    @property
    def report_fd(self) -> int:
        return self._report_read

    def returncode(self) -> int | None:
        return self._popen.poll()

    def describe_exit(self) -> str:
        code = self._popen.poll()
        if code is None:
            return "still running"
        if code < 0:
            try:
                return f"killed by signal {signal.Signals(-code).name}"
            except ValueError:
                return f"killed by signal {-code}"
        return f"exited with code {code}"

    # -- teardown ------------------------------------------------------------------------------
    def kill(self) -> None:
        if self._killed:
            return
        self._killed = True
        self._watchdog_stop.set()
        try:
            os.killpg(self.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        try:
            self._popen.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass

    def close(self) -> None:
        """Kill, reap, close descriptors and delete the private directory."""
        self.kill()
        self._reader.join(timeout=2)
        for fd in (self._ctrl_write, self._report_read):
            try:
                os.close(fd)
            except OSError:
                pass
        if self._popen.stdout:
            self._popen.stdout.close()
        shutil.rmtree(self.private_dir, ignore_errors=True)
