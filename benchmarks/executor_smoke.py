"""Quick check of one design on this machine: the scaled-add examples through `evaluate_local`, with timing.

    TRITONRL_SANDBOX_DESIGN=executor python benchmarks/executor_smoke.py
"""

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from sandbox_service.evaluation import evaluate_local  # noqa: E402
from sandbox_service.options import EvalOptions  # noqa: E402

EXAMPLES = Path(__file__).resolve().parents[1] / "sandbox_service" / "examples"
reference = (EXAMPLES / "scaled_add_reference.py").read_text()
for name in ("correct", "incorrect", "cheat"):
    started = time.monotonic()
    result = evaluate_local(reference, (EXAMPLES / f"scaled_add_{name}.py").read_text(), EvalOptions())
    print(name, result.status.value, result.error[:800], result.speedup, result.candidate_time_us,
          [(l.name, l.detail[:160]) for l in result.layers if l.name in ("trace", "timing")],
          f"{time.monotonic() - started:.1f}s", flush=True)
