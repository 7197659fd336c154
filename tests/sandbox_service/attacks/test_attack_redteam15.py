"""Red team 15: the heap freeze (`child_main.settle_heap`, the template's freeze), the children's
CUDA_VISIBLE_DEVICES mapped through the server's (`process.visible_device`) and the executor's CPU read from /proc
(`cpu_trace.py`). Each FINDING test asserts the correct behaviour, so it FAILED while its flaw was there. CPU only;
no finding gives a candidate a reward without doing the work.

- FINDING kernels-outlive-their-job (older than the freeze): Triton registers every `JITFunction` it makes in a
  module-level dict (`triton.runtime.jit._triton_jit_function_registry`, keyed "module:qualname"), and the executor
  names each job's kernel module afresh, so `runner.forget_job`'s collection never freed a job's kernels: each one,
  its module's globals (literal values the candidate chose) and its compiled kernels (their loaded GPU modules are
  driver memory outside torch's allocator, outside the job's `cap_memory` and the scrub) stayed for the executor's
  whole life (up to EXECUTOR_JOBS jobs), and a candidate could make them large. Fix: forget_job drops the
  registry's entries of the jobs' kernel modules before collecting.
- FINDING child-gpu-under-another-device-order: the server numbers its GPUs in the order its CUDA_DEVICE_ORDER
  says, but children did not inherit it, so a child read the entry it was given in CUDA's default (fastest-first)
  order: under CUDA_DEVICE_ORDER=PCI_BUS_ID and CUDA_VISIBLE_DEVICES=2,3 on a machine whose GPUs differ, possibly a
  GPU outside the allocation. Fix: CUDA_DEVICE_ORDER is inherited (a server setting; no candidate sets it).
- FINDING trace-can-kill-the-reader (hardening; no candidate route found: only the executor names itself):
  `cpu_seconds` read /proc/PID/stat as text, and a process name that is not UTF-8 raised in the message stream's
  reader thread, which died without a word (the evaluation waited for its deadline). Fix: the file is read as
  bytes and any unreadable content is "gone".
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

from sandbox_service.worker.process import base_environment

ROOT = Path(__file__).resolve().parents[3]


def test_forget_job_lets_go_of_the_job_s_kernels():
    probe = textwrap.dedent("""
        import gc, tempfile, weakref
        from pathlib import Path
        from sandbox_service.worker import child_main
        from sandbox_service.executor import runner, kernels
        child_main.settle_heap()
        source = ("def add(x_ptr, n, BLOCK: tl.constexpr):\\n"
                  "    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)\\n"
                  "    tl.store(x_ptr + i, tl.load(x_ptr + i, mask=i < n) + 1, mask=i < n)\\n")
        program = {"add": {"source": source, "globals": {"tl": {"module": "triton.language"}}}}
        kept = []
        for _ in range(3):  # three jobs of one executor, as runner.run names their modules
            runner._jobs += 1
            module = kernels.load_kernels(program, Path(tempfile.mkdtemp()), f"tritonrl_kernels_{runner._jobs}")
            kept.append(weakref.ref(module.add))
            del module
            runner.forget_job()
        print(sum(ref() is not None for ref in kept))
    """)
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}  # JIT kernels, as on a CUDA lane
    env["PYTHONPATH"] = str(ROOT)
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=300, cwd=ROOT,
                          env=env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split()[-1] == "0", "earlier jobs' kernels are still alive after forget_job"


def test_a_child_reads_its_gpu_number_in_the_server_s_device_order(monkeypatch, tmp_path: Path):
    monkeypatch.setenv("CUDA_DEVICE_ORDER", "PCI_BUS_ID")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,3")
    env = base_environment("cuda", 0, tmp_path, 1)
    named_by_uuid = env["CUDA_VISIBLE_DEVICES"].startswith(("GPU-", "MIG-"))
    assert named_by_uuid or env.get("CUDA_DEVICE_ORDER") == "PCI_BUS_ID", \
        f"the child reads {env['CUDA_VISIBLE_DEVICES']!r} in CUDA's default (fastest-first) order"


def test_a_process_name_that_is_not_utf8_does_not_stop_the_message_stream():
    import time

    from sandbox_service.worker import conversation
    from sandbox_service.worker.cpu_trace import CpuTrace

    named = subprocess.Popen([sys.executable, "-c", "import ctypes, time; "
                              "ctypes.CDLL(None).prctl(15, b'trl-\\xff) x', 0, 0, 0); time.sleep(30)"])
    try:
        time.sleep(0.5)

        class _Child:
            pid = named.pid
            _closed = False
            kinds = ["inputs_ready", "outputs_done"]

            def receive(self, timeout=None) -> dict:
                if not self.kinds:
                    raise OSError("closed")
                return {"type": self.kinds.pop(0), "nonce": "n"}

        class _Deadline:
            until = time.monotonic() + 5

            def remaining(self) -> float:
                return self.until - time.monotonic()

        trace = CpuTrace(os.getpid())
        trace.pid = named.pid  # from here on, the trace of a process whose name is not UTF-8
        stream = conversation.MessageStream(_Child(), "n", trace=trace)
        try:
            assert stream.next(_Deadline(), None)["type"] == "inputs_ready"
        finally:
            stream.close()
    finally:
        named.kill()
        named.wait()
