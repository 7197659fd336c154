"""Where a jitted step's device time goes: a JAX profiler trace summarised by kernel and by kind.

    with device_profile.trace(directory):
        ...run the steps...
    summary = device_profile.summarise(directory, steps=2)
    print(device_profile.table(summary))

The trace is read back with `jax.profiler.ProfileData` (no TensorBoard plugin needed). Kernel events
come from the device planes' stream lines; each kernel name is put in one kind by its name (matmul,
attention, collective, copy or other fusion), so a step's time splits into those parts per step.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

KINDS = (  # first match wins; substrings of lower-cased kernel names
    ("attention", ("sdpa", "fmha", "flash", "attn", "cudnn_generated")),
    ("matmul", ("gemm", "xmma", "cutlass", "nvjet", "cublas", "matmul", "wgmma")),
    ("collective", ("nccl", "all_gather", "allgather", "reduce_scatter", "reducescatter", "all_reduce", "allreduce")),
    ("copy", ("memcpy", "memset", "copy")),
)


def kind_of(kernel: str) -> str:
    name = kernel.lower()
    for kind, needles in KINDS:
        if any(n in name for n in needles):
            return kind
    return "other"


@dataclasses.dataclass(frozen=True)
class Summary:
    steps: int
    by_kernel: dict[str, float]  # kernel name -> device ms per step, summed over devices / devices
    by_kind: dict[str, float]  # kind -> device ms per step
    devices: int

    @property
    def total_ms(self) -> float:
        return sum(self.by_kind.values())


@contextlib.contextmanager
def trace(directory: Path) -> Iterator[None]:
    import jax

    with jax.profiler.trace(str(directory)):
        yield


def summarise(directory: Path, steps: int) -> Summary:
    """Kernel time per step and device from the newest trace under `directory`."""
    from jax.profiler import ProfileData

    files = sorted(Path(directory).rglob("*.xplane.pb"), key=lambda p: p.stat().st_mtime)
    if not files:
        raise FileNotFoundError(f"no *.xplane.pb under {directory}")
    by_kernel: dict[str, float] = defaultdict(float)
    devices = 0
    for plane in ProfileData.from_file(str(files[-1])).planes:
        if not plane.name.startswith("/device:GPU"):
            continue
        devices += 1
        for line in plane.lines:
            if not line.name.lower().startswith("stream"):
                continue  # derived lines ("XLA Ops", "XLA Modules") repeat the same time
            for event in line.events:
                by_kernel[event.name] += event.duration_ns / 1e6
    scale = 1.0 / (steps * max(devices, 1))
    by_kernel = {k: v * scale for k, v in sorted(by_kernel.items(), key=lambda kv: -kv[1])}
    by_kind: dict[str, float] = defaultdict(float)
    for kernel, ms in by_kernel.items():
        by_kind[kind_of(kernel)] += ms
    return Summary(steps, by_kernel, dict(sorted(by_kind.items(), key=lambda kv: -kv[1])), devices)


def table(summary: Summary, top: int = 20, width: int = 90) -> str:
    if not summary.devices:
        return "no GPU device in the trace: a CPU run has no kernel timeline to summarise"
    lines = [f"device kernel time per step and device: {summary.total_ms:.1f} ms over {summary.devices} device(s)"]
    lines += [f"  {kind:<11}{ms:9.1f} ms {100 * ms / max(summary.total_ms, 1e-9):5.1f}%"
              for kind, ms in summary.by_kind.items()]
    lines.append(f"  top {top} kernels:")
    for kernel, ms in list(summary.by_kernel.items())[:top]:
        lines.append(f"  {ms:9.2f} ms  {kind_of(kernel):<10} {kernel[:width]}")
    return "\n".join(lines)
