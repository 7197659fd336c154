"""What the runtime layer costs: forward time with and without the RuntimeMonitor, side by side.

For every honest kernel of the verifier corpus, build the problem and the candidate in this process,
then time the same forward call plainly and inside `RuntimeMonitor.forward_scope()` (dispatch-level
operator recording, launch counting, NaN-poisoning of fresh buffers), alternating the two so drift
hits both equally. Prints, per kernel and overall, the median time of each and the added time per
forward; an evaluation pays it once per correctness trial (5 by default). The post-forward checks
(input comparison, aliasing, unwritten outputs) are timed separately, also per trial.

    python benchmarks/runtime_layer_overhead.py [--repeats 20] [--backend interpreter|cuda]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CORPUS = REPO / "tests" / "sandbox_service" / "corpus"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--backend", choices=["interpreter", "cuda"], default="interpreter")
    args = parser.parse_args()
    if args.backend == "interpreter":
        os.environ["TRITON_INTERPRET"] = "1"  # before triton is imported
    sys.path.insert(0, str(REPO))
    import torch
    import yaml

    from sandbox_service.verifier.runtime import RuntimeMonitor
    from sandbox_service.worker import harness

    if args.backend == "interpreter":
        harness.enable_interpreter_autotune()
        harness.backport_interpreter_fixes()
    device = harness.device_for("cuda" if args.backend == "cuda" else "interpreter")
    monitor = RuntimeMonitor(device)
    monitor.install()
    entries = [e for e in yaml.safe_load((CORPUS / "manifest.yaml").read_text())["candidates"] if e["category"] == "honest"]
    rows = []
    for index, entry in enumerate(entries):
        reference = harness.load_module(CORPUS / entry["problem"], f"reference_{index}")
        candidate = harness.load_module(CORPUS / entry["file"], f"candidate_{index}")
        init = harness.init_inputs(reference, 42, device)
        model = harness.build_model(candidate, "ModelNew", init, 42, device)
        inputs = harness.trial_inputs(reference, 7, device)
        plain, monitored, checks = [], [], []
        with torch.no_grad():
            model(*inputs)  # compile / warm up
            for _ in range(args.repeats):
                t = time.perf_counter()
                model(*inputs)
                harness.synchronize(device)
                plain.append(time.perf_counter() - t)
                used = harness.clone(inputs)
                t = time.perf_counter()
                with monitor.forward_scope():
                    outputs = harness.flatten_outputs(model(*used))
                harness.synchronize(device)
                monitored.append(time.perf_counter() - t)
                t = time.perf_counter()
                monitor.check_after_forward(inputs, used, outputs)
                checks.append(time.perf_counter() - t)
        rows.append((entry["file"], statistics.median(plain), statistics.median(monitored), statistics.median(checks)))
        if monitor.findings:
            print(f"unexpected findings on honest {entry['file']}: {monitor.findings}", file=sys.stderr)
            monitor.findings.clear()

    print(f"{'honest kernel':<40} {'plain ms':>9} {'monitored ms':>13} {'added ms':>9} {'ratio':>6} {'checks ms':>10}")
    for name, plain, monitored, checks in rows:
        print(f"{name:<40} {plain * 1e3:9.2f} {monitored * 1e3:13.2f} {(monitored - plain) * 1e3:9.2f} "
              f"{monitored / plain:6.2f} {checks * 1e3:10.2f}")
    added = [m - p for _, p, m, _ in rows]
    ratios = [m / p for _, p, m, _ in rows]
    checks = [c for *_, c in rows]
    print(f"\nbackend {args.backend}, {len(rows)} kernels, {args.repeats} repeats each: added per forward median "
          f"{statistics.median(added) * 1e3:.2f} ms (max {max(added) * 1e3:.2f} ms), ratio median "
          f"{statistics.median(ratios):.2f}; post-forward checks median {statistics.median(checks) * 1e3:.2f} ms; "
          f"per evaluation (5 trials): {5 * (statistics.median(added) + statistics.median(checks)) * 1e3:.1f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
