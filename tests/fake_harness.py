"""Fake KernelBench harness folders for the benchmark tests: a run_one.py that behaves as told, no GPU.

Each folder has the layout benchmarks/kernelbench_harness.py checks (run_one.py and src/eval.py). The
run_one.py receives the real command line (REF.py CANDIDATE.py --trials N --perf-trials N [--no-perf]).
"""

from __future__ import annotations

import textwrap
from pathlib import Path

# Prints noise on both streams, then one JSON line that echoes what it was given. The verdict follows the
# reference: "FAIL_OOM" in it -> a CUDA out-of-memory runtime error, "FAIL_MISMATCH" -> an output mismatch.
ECHO = """
import json, os, sys
reference, candidate = open(sys.argv[1]).read(), open(sys.argv[2]).read()
print("[Eval] noise on stdout"); print("noise on stderr", file=sys.stderr)
argv = sys.argv[3:]
metadata = {"argv": argv, "triton_cache": os.environ.get("TRITON_CACHE_DIR", ""),
            "candidate_has_model_new": "class ModelNew" in candidate}
correct, compiled = True, True
if "FAIL_OOM" in reference:
    correct = False
    metadata["runtime_error"] = "CUDA out of memory. Tried to allocate 20.00 GiB"
elif "FAIL_MISMATCH" in reference:
    correct = False
    metadata.update(correctness_issue="Output mismatch", max_difference=["0.500000"])
perf = "--no-perf" not in argv
print(json.dumps({"compiled": compiled, "correctness": correct, "runtime": 1.25 if perf and correct else -1.0,
                  "runtime_stats": {}, "metadata": metadata, "returned_none": False, "wall_s": 0.5,
                  "process_s": 0.6, "peak_allocated_mb": 123.0}))
"""

# Starts a grandchild that would outlive it, records its pid beside this file, then hangs.
HANG = """
import os, subprocess, sys, time
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "grandchild.pid"), "w").write(str(child.pid))
print("started", flush=True)
time.sleep(60)
"""

CRASH = """
import sys
print("Traceback (most recent call last):\\nRuntimeError: boom in the harness", file=sys.stderr)
sys.exit(1)
"""

KILLED = """
import os, signal
os.kill(os.getpid(), signal.SIGKILL)
"""


def make_harness(root: Path, name: str, script: str) -> Path:
    """A harness folder `root/name` whose run_one.py is `script`."""
    folder = root / name
    (folder / "src").mkdir(parents=True)
    (folder / "src" / "eval.py").write_text("# stand-in: the fake run_one.py does not import it\n")
    (folder / "run_one.py").write_text(textwrap.dedent(script).lstrip())
    return folder
