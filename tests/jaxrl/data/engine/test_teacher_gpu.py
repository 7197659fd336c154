"""Teacher solutions at full scale on a GPU: correct on the default inputs and every input set, and the
references are big enough to time (tens of microseconds on an H100). Run on the device machine:
`python -m pytest -m gpu tests/jaxrl/data/engine/test_teacher_gpu.py -s`."""

from __future__ import annotations

import pytest

from engine_checks import evaluate_many, variants
from jaxrl.data.engine import generate_task, list_families
from sandbox_service.options import EvalOptions

pytestmark = pytest.mark.gpu
# Whole-tensor losses return one number: the sandbox always marks them degenerate and applies its L2 check.
SCALAR_OUTPUT = {"mse_loss", "l1_loss", "huber_loss", "cross_entropy", "kl_div", "cosine_loss", "hinge_loss"}


def test_every_family_is_correct_and_timeable_at_full_scale():
    tasks = [generate_task(info.name, seed=0, scale="full") for info in list_families() if info.templated]
    pairs, labels = [], []
    for task in tasks:
        for name, reference in variants(task).items():
            pairs.append((reference, task.solution.code))
            labels.append((task, name))
    results = evaluate_many(pairs, EvalOptions(trials=2, time=True, timing_runs=20, warmup_runs=2), "cuda", workers=6)
    failures, slow, degenerate = [], [], []
    print(f"\n{'family':20} {'set':14} {'status':10} {'ref_us':>9} {'teacher_us':>10} {'speedup':>7}  dtype shapes")
    for (task, name), result in zip(labels, results):
        status = result.status.value if hasattr(result.status, "value") else result.status
        times = f"{result.ref_time_us or 0:9.1f} {result.candidate_time_us or 0:10.1f} {result.speedup or 0:7.2f}"
        print(f"{task.family:20} {name:14} {status:10} {times}  {task.dtype} {task.params['shapes']}")
        if status != "ok":
            failures.append((task.family, name, status, (result.error or "")[-600:], result.violations[:3]))
        elif name == "default" and (result.ref_time_us or 0) < 20:
            slow.append((task.family, result.ref_time_us))
        if result.degenerate_reference and task.family not in SCALAR_OUTPUT:
            degenerate.append((task.family, name))
    assert not failures, failures
    assert not degenerate, degenerate
    assert not slow, slow
