"""Handles on isolated child processes: own session and process group, scrubbed environment, private
temp dir, bounded output, a memory watchdog, and freeze/thaw for exclusive GPU timing.

Children are forked from a template process (`zygote.py`) that has already imported torch and Triton,
so a child costs a fork instead of an interpreter start and a torch import. Nothing a child prints is
interpreted: stdout/stderr are captured, bounded, and kept only for debugging; messages travel on a
dedicated pipe pair (`protocol.py`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import signal
import sys
import tempfile
import threading
import time
from pathlib import Path

from sandbox_service.worker import protocol

log = logging.getLogger(__name__)

PACKAGE_ROOT = Path(__file__).resolve().parents[2]

# Variables a child may inherit; everything else (API keys, tokens, proxies) is dropped.
# Hardware work queues per CUDA context. Every candidate gets a fresh process, so contexts are made and torn
# down all the time, and with the driver's default of 8 queues the driver managed about 4.8 contexts a
# second for a whole H100 (16 at once); with 1 it managed 13.1 (benchmarks/cuda_context_churn.py). One
# queue serialises work on different streams of a process: KernelBench references and candidates run on
# one stream, and side-stream work is still waited for and caught as before. The server's
# TRITONRL_CUDA_MAX_CONNECTIONS overrides it (0: the driver's default).
CUDA_CONNECTIONS = "1"
CUDA_CONNECTIONS_ENV = "TRITONRL_CUDA_MAX_CONNECTIONS"
_INHERITED_ENV = (
    "LD_LIBRARY_PATH",
    "CUDA_HOME",
    "CUDA_PATH",
    "CUDA_DEVICE_ORDER",  # the order the server numbered its GPUs in: visible_device's names are read in it
    "TRITON_PTXAS_PATH",
    "TRITON_LIBCUDA_PATH",
    "TRITON_HOME",
    "NCCL_NVLS_ENABLE",
    "TORCH_SYMM_MEM_DISABLE_MULTICAST",
    "NVSHMEM_DISABLE_NVLS",
)


@dataclasses.dataclass(frozen=True)
class ChildSpec:
    """What a child is for and where it runs."""

    role: str  # "candidate", "judge", "validator" or "builder"
    backend: str  # "cuda" or "interpreter"
    gpu: int | None = None
    work_root: Path | None = None
    output_limit_bytes: int = 64 * 1024
    cpu_threads: int = 1


class BoundedOutput:
    """Keeps the head and tail of a stream and counts the rest; never grows without bound."""

    def __init__(self, limit: int):
        self.limit = limit
        self.ended = threading.Event()  # set once the stream reached its end (the writer is gone)
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0
        self._lock = threading.Lock()

    def feed(self, chunk: bytes) -> None:
        with self._lock:
            self.total += len(chunk)
            room = self.limit // 2 - len(self.head)
            if room > 0:
                self.head.extend(chunk[:room])
                chunk = chunk[room:]
            if chunk:
                self.tail.extend(chunk)
                del self.tail[: max(0, len(self.tail) - self.limit // 2)]

    def text(self) -> str:
        with self._lock:
            dropped = self.total - len(self.head) - len(self.tail)
            middle = f"\n... [{dropped} bytes of output dropped] ...\n" if dropped > 0 else ""
            return self.head.decode(errors="replace") + middle + self.tail.decode(errors="replace")


def drain_into(fd: int, sink: BoundedOutput) -> threading.Thread:
    """A daemon thread that reads `fd` until EOF into `sink`, then closes it."""

    def drain() -> None:
        try:
            while True:
                chunk = os.read(fd, 65536)
                if not chunk:
                    return
                sink.feed(chunk)
        except OSError:
            return
        finally:
            try:
                os.close(fd)
            except OSError:
                pass
            sink.ended.set()

    thread = threading.Thread(target=drain, daemon=True)
    thread.start()
    return thread


def base_environment(backend: str, gpu: int | None, private_dir: Path, cpu_threads: int) -> dict[str, str]:
    """The scrubbed environment of the template and of every child (an allow-list)."""
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
        OMP_NUM_THREADS=str(cpu_threads),
        MKL_NUM_THREADS=str(cpu_threads),
        OPENBLAS_NUM_THREADS=str(cpu_threads),
        # torch.cuda.is_available() through NVML: the template must never initialise the CUDA driver,
        # or its forked children could not use CUDA.
        PYTORCH_NVML_BASED_CUDA_CHECK="1",
        CUDA_VISIBLE_DEVICES="" if gpu is None else visible_device(gpu),
        TRITON_CACHE_DIR=str(private_dir / "triton-cache"),
    )
    if backend == "interpreter":
        env["TRITON_INTERPRET"] = "1"
    elif backend == "cuda":
        connections = os.environ.get(CUDA_CONNECTIONS_ENV, CUDA_CONNECTIONS)
        if connections != "0":
            env["CUDA_DEVICE_MAX_CONNECTIONS"] = connections
    return env


def visible_device(gpu: int) -> str:
    """How a child must name the server's GPU `gpu` in CUDA_VISIBLE_DEVICES. The server numbers the GPUs it sees,
    so under a CUDA_VISIBLE_DEVICES of its own (a cluster's allocation, "2,3" or GPU UUIDs) its GPU 0 is that
    list's first entry, not the machine's GPU 0."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is None:
        return str(gpu)
    entries = [entry.strip() for entry in visible.split(",")]
    if not 0 <= gpu < len(entries) or not all(entries[: gpu + 1]):
        raise ValueError(f"GPU {gpu} is not among CUDA_VISIBLE_DEVICES={visible!r}")
    return entries[gpu]


def read_rss_mb(pid: int) -> float:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        pass
    return 0.0


def describe_returncode(code: int | None) -> str:
    if code is None:
        return "still running"
    if code < 0:
        try:
            return f"killed by signal {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exited with code {code}"


class ExitWatch:
    """The exit status of a process that is not our own child (the template reaps it and tells us)."""

    def __init__(self):
        self._code: int | None = None
        self._done = threading.Event()

    def set(self, code: int) -> None:
        self._code = code
        self._done.set()

    def wait(self, timeout: float) -> int | None:
        self._done.wait(timeout)
        return self._code

    @property
    def code(self) -> int | None:
        return self._code

    @property
    def exited(self) -> bool:
        return self._done.is_set()


class Child:
    """A started child: `send`/`receive` on its channel, `kill()`, `close()` (kill + clean up).

    Its process group id equals its pid (it calls setsid), so killpg reaches everything it starts.
    """

    def __init__(self, spec: ChildSpec, pid: int, ctrl_write: int, report_read: int, output: BoundedOutput,
                 private_dir: Path, exit_watch: ExitWatch, on_close=None):
        self.spec = spec
        self.pid = pid
        self.private_dir = private_dir
        self.started_at = time.monotonic()
        self._ctrl_write = ctrl_write
        self._report_read = report_read
        self.receiver = protocol.Receiver(report_read)
        self._output = output
        self._exit = exit_watch
        self._on_close = on_close
        self.memory_exceeded = False
        self.ready_after_s = 0.0
        self._watchdog_stop = threading.Event()
        self._killed = False
        self._closed = False
        self._lock = threading.Lock()
        self._stops = 0  # freezes not yet thawed: it runs again only when every one of them is

    # -- output and memory ---------------------------------------------------------------------
    def output(self, wait_s: float = 0.0) -> str:
        """What it printed so far; with `wait_s`, first waits that long at most for all of it (its end of the
        pipe closes when it dies)."""
        if wait_s:
            self._output.ended.wait(wait_s)
        return self._output.text()

    def rss_mb(self) -> float:
        return 0.0 if self._exit.exited else read_rss_mb(self.pid)

    def watch_memory(self, limit_mb: int, interval_s: float = 0.1) -> None:
        """Kill the child once its resident memory and the files in its folder pass the limit together (CUDA
        forbids an address-space rlimit; on a memory-backed work root its files are memory too, and on disk they
        fill the disk). The folder is measured every FOLDER_EVERY_TICKS ticks. A new watch replaces the last
        one (an executor serves one evaluation after another, each with its own limit)."""
        self.stop_watching()
        stop = self._watch_stop = threading.Event()

        def watch() -> None:
            tick, files_mb = 0, 0.0
            while not stop.wait(interval_s) and not self._watchdog_stop.is_set():
                if tick % FOLDER_EVERY_TICKS == 0:
                    files_mb = folder_mb(self.private_dir)
                tick += 1
                if self.rss_mb() + files_mb > limit_mb:
                    self.memory_exceeded = True
                    self.kill()
                    return

        threading.Thread(target=watch, daemon=True).start()

    def stop_watching(self) -> None:
        watch = getattr(self, "_watch_stop", None)
        if watch is not None:
            watch.set()

    def over_memory_limit(self, limit_mb: int) -> bool:
        """Its resident memory and its folder's files together, measured now (the watchdog samples: a quick
        candidate can finish between two samples), past `limit_mb`."""
        exceeded = self.rss_mb() + folder_mb(self.private_dir) > limit_mb
        self.memory_exceeded = self.memory_exceeded or exceeded
        return exceeded

    # -- messages ------------------------------------------------------------------------------
    def send(self, message: dict) -> None:
        protocol.send(self._ctrl_write, message)

    def receive(self, timeout: float | None = None) -> dict:
        return self.receiver.receive(timeout)

    def returncode(self) -> int | None:
        return self._exit.code

    @property
    def exited(self) -> bool:
        return self._exit.exited

    def describe_exit(self, wait_s: float = 2.0) -> str:
        """How it ended; waits briefly for the status, which arrives just after the channel closes."""
        return describe_returncode(self._exit.wait(wait_s))

    # -- signals -------------------------------------------------------------------------------
    def _signal(self, signum: int) -> None:
        if self._exit.exited:
            return
        for send in (os.killpg, os.kill):  # killpg first; kill covers the instant before the child's setsid
            try:
                send(self.pid, signum)
            except (ProcessLookupError, PermissionError):
                continue

    def freeze(self) -> None:
        """SIGSTOP the whole group: it can launch no GPU work while another evaluation is timed. Freezes nest (a
        timing hold and the judge's read of its IPC outputs may overlap): each is ended by its own `thaw`, and the
        group runs again only after the last."""
        with self._lock:
            self._stops += 1
            if self._stops == 1:
                self._signal(signal.SIGSTOP)

    def thaw(self) -> None:
        with self._lock:
            if self._stops == 0:
                raise RuntimeError("thaw() without a freeze()")
            self._stops -= 1
            if self._stops == 0:
                self._signal(signal.SIGCONT)

    def kill(self, wait: bool = True) -> None:
        """SIGKILL the process group; with `wait`, until the template reports the exit (at most 10 s)."""
        with self._lock:
            first = not self._killed
            self._killed = True
        if first:
            self._watchdog_stop.set()
            self._signal(signal.SIGKILL)
            self._signal(signal.SIGCONT)  # a stopped process dies only once it runs again
        if wait:
            self._exit.wait(10.0)

    def close(self, wait: bool = True) -> None:
        """Kill, close descriptors and delete the private directory. Without `wait` the process is killed
        now and the rest happens on a background thread (a CUDA process takes a moment to die, and the
        evaluation that used it need not wait for that)."""
        if self._closed:
            return
        self._closed = True
        self.kill(wait=False)
        if wait:
            self._finish_close()
        else:
            threading.Thread(target=self._finish_close, name="child-reaper", daemon=True).start()

    def _finish_close(self) -> None:
        self._exit.wait(10.0)
        for fd in (self._ctrl_write, self._report_read):
            try:
                os.close(fd)
            except OSError:
                pass
        try:
            remove_tree(self.private_dir)  # the child shaped it: any depth, any number of files
        except Exception:  # noqa: BLE001 - never lose the close callback over a folder
            log.exception("could not remove %s", self.private_dir)
        if self._on_close is not None:
            self._on_close(self)


FOLDER_EVERY_TICKS = 5
MAX_FOLDER_ENTRIES = 100_000  # more than an honest candidate makes: beyond, the folder counts as over any limit


def _entries(root: Path):
    """Every entry under `root`, parents before their children, without recursion (Python 3.11's
    shutil.rmtree and os.walk recurse once per level: a folder nested deeper than the recursion limit raised
    RecursionError) and without following links. A folder is listed whole before its entries are yielded."""
    stack = [str(root)]
    while stack:
        try:
            scanned = list(os.scandir(stack.pop()))
        except OSError:
            continue
        for entry in scanned:
            if entry.is_dir(follow_symlinks=False):
                stack.append(entry.path)
            yield entry


def folder_mb(root: Path) -> float:
    """Space the files under `root` take (allocated blocks, links not followed)."""
    total = 0
    for count, entry in enumerate(_entries(root), start=1):
        if count > MAX_FOLDER_ENTRIES:
            return float("inf")
        with contextlib.suppress(OSError):
            total += entry.stat(follow_symlinks=False).st_blocks * 512
    return total / (1 << 20)


def remove_tree(root: Path) -> None:
    """Delete a folder an untrusted process filled: any depth, links removed and never followed."""
    folders = [str(root)]
    for entry in _entries(root):
        if entry.is_dir(follow_symlinks=False):
            folders.append(entry.path)
        else:
            with contextlib.suppress(OSError):
                os.unlink(entry.path)
    for folder in reversed(folders):  # children before their parents
        with contextlib.suppress(OSError):
            os.rmdir(folder)


def make_private_dir(role: str, work_root: Path | None) -> Path:
    return Path(tempfile.mkdtemp(prefix=f"tritonrl-{role}-", dir=work_root))
