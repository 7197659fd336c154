"""Worker process for `cpu_sized.validate`: run KernelBench reference modules and describe them.

Runs with torch (CPU, one thread) in its own process so the caller, which must not import torch,
can kill it when a reference hangs. Input: a JSONL file of {"key", "code"} given as argv[1].
Output: `READY` once torch is loaded, then one `RESULT {json}` line per problem on stdout, in
order; the references' own prints go to stderr so they cannot be mistaken for results. Only
trusted benchmark code runs here.
"""

from __future__ import annotations

import contextlib
import json
import sys
import time

# torch is imported in main(): the parent imports RESULT_PREFIX from here without loading torch.
RESULT_PREFIX = "RESULT "
# Printed once torch is imported, so the caller's per-problem time limit excludes start-up.
READY = "READY"


def _tensors(value) -> list:
    import torch

    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (list, tuple)):
        return [t for item in value for t in _tensors(item)]
    if isinstance(value, dict):
        return [t for item in value.values() for t in _tensors(item)]
    return []


def _run_once(namespace: dict, forward_seed: int) -> tuple[list, list]:
    """Build the model and inputs from seed 0, then run forward with the RNG at `forward_seed`."""
    import torch

    torch.manual_seed(0)
    model = namespace["Model"](*namespace["get_init_inputs"]())
    inputs = namespace["get_inputs"]()
    torch.manual_seed(forward_seed)
    with torch.no_grad():
        output = model(*inputs)
    return _tensors(inputs), _tensors(output)


def describe(code: str) -> dict:
    """Build and run the reference twice; report time, size and output checks.

    Both runs build the same weights and inputs; the second draws a different random state just
    before forward, so an output that depends on it (dropout in training mode, torch.rand in forward)
    is caught: no candidate could match such a reference.
    """
    import torch

    namespace: dict = {"__name__": "kernelbench_reference"}
    exec(compile(code, "<reference>", "exec"), namespace)
    start = time.perf_counter()
    inputs, outputs = _run_once(namespace, forward_seed=0)
    seconds = time.perf_counter() - start
    _, again = _run_once(namespace, forward_seed=1)
    if not outputs:
        raise ValueError("forward returned no tensor")
    floats = [t.detach().reshape(-1).double() for t in outputs if t.is_floating_point()]
    flat = torch.cat(floats) if floats else torch.zeros(0, dtype=torch.float64)
    finite = bool(torch.isfinite(flat).all())
    return {
        "seconds": seconds,
        "elements": sum(t.numel() for t in inputs + outputs),
        "finite": finite,
        "constant": flat.numel() > 1 and finite and bool(flat.max() == flat.min()),
        "rng_independent": len(outputs) == len(again) and all(_same(a, b) for a, b in zip(outputs, again)),
    }


def _same(a, b) -> bool:
    """Equal shape, dtype and values, NaN equal to NaN (a non-finite output is reported on its own)."""
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    return bool(((a == b) | ((a != a) & (b != b))).all())


def main(path: str) -> int:
    import torch

    torch.set_num_threads(1)
    print(READY, flush=True)
    with open(path) as f:
        requests = [json.loads(line) for line in f if line.strip()]
    for request in requests:
        try:
            with contextlib.redirect_stdout(sys.stderr):
                result = describe(request["code"])
        except Exception as exc:  # noqa: BLE001 - any failure of the reference is a verdict
            result = {"error": f"{type(exc).__name__}: {exc}"[:400]}
        print(RESULT_PREFIX + json.dumps({"key": request["key"], **result}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
