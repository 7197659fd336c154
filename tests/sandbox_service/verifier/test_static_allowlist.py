"""The static layer's allow-lists against every honest kernel the repository has, without running any.

Honest sources: the corpus's honest candidates, benchmarks/kernels, the correct example, every solution the
data engine's teacher renders (every templated family, several seeds, both scales) and the modules the
Inductor converter writes from the recorded captures. None may break a static rule under either policy:
an allow-list that rejects honest code costs it its whole reward.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from jaxrl.data.engine import generate_task
from jaxrl.data.engine.families import FAMILIES
from sandbox_service.inductor.convert import GraphArgument, GraphCapture, convert
from sandbox_service.options import Policy
from sandbox_service.verifier.static import allowlist
from sandbox_service.verifier.static_rules import check_static

REPO = Path(__file__).resolve().parents[3]
TEACHER_SEEDS = range(6)
CAPTURES = REPO / "tests" / "sandbox_service" / "inductor" / "fixtures" / "captures"


def honest_sources() -> dict[str, str]:
    """Every honest kernel module, by `<source>/<name>`."""
    sources = {f"corpus/{p.name}": p.read_text() for p in sorted((REPO / "tests/sandbox_service/corpus/honest").glob("*.py"))}
    sources |= {f"benchmarks/{p.name}": p.read_text() for p in sorted((REPO / "benchmarks/kernels").rglob("*.py"))}
    sources["examples/scaled_add_correct.py"] = (REPO / "sandbox_service/examples/scaled_add_correct.py").read_text()
    for name, family in FAMILIES.items():
        if family.templated:
            for scale in ("cpu", "full"):
                for seed in TEACHER_SEEDS:
                    sources[f"teacher/{name}-{scale}-{seed}"] = generate_task(name, seed, scale).solution.code
    for path in sorted(CAPTURES.glob("*.json")):
        if path.name.startswith("linear_relu"):
            continue  # Inductor calls extern_kernels for the matmul: the converter refuses it
        record = json.loads(path.read_text())
        capture = GraphCapture(record["wrapper"], tuple(GraphArgument(**a) for a in record["arguments"]),
                               record["outputs"], record["returns_tuple"])
        reference = (path.parent.parent / f"{path.name.split('.')[0]}.py").read_text()
        sources[f"inductor/{path.stem}"] = convert(reference, capture).source
        sources[f"inductor/{path.stem}-portable"] = convert(reference, capture, portable=True).source
    return sources


SOURCES = honest_sources()


def test_every_source_of_honest_kernels_is_covered():
    counts = Counter(name.split("/")[0] for name in SOURCES)
    templated = sum(family.templated for family in FAMILIES.values())
    assert counts["corpus"] >= 15 and counts["benchmarks"] >= 14 and counts["examples"] == 1
    assert counts["teacher"] == templated * 2 * len(TEACHER_SEEDS) and templated >= 60
    assert counts["inductor"] == 16


@pytest.mark.parametrize("name", sorted(SOURCES))
def test_honest_kernels_pass_the_static_layer_under_both_policies(name):
    code = SOURCES[name]
    assert [(v.rule, v.line, v.message) for v in check_static(code, Policy.STRICT)] == []
    assert [(v.rule, v.line, v.message) for v in check_static(code, Policy.RELAXED)] == []


@pytest.mark.parametrize("path, problem", [
    ("torch.matmul", None),
    ("torch.nn.functional.relu", None),
    ("torch.nn.Linear", None),
    ("torch.Tensor.view.__call__", None),
    ("triton.language.extra.cuda.libdevice.tanh", None),
    ("triton.runtime.driver.active.utils.get_device_properties", None),
    ("math.sqrt", None),
    ("os.environ.get", None),
    ("gc.get_objects", None),  # not an allowed module: its import is reported instead
    ("torch.os", "a module reached through torch"),
    ("torch.nn.functional.np", "a module reached through torch.nn.functional"),
    ("typing.sys", "a module reached through typing"),
    ("torch.utils.data", "a module reached through torch"),
    ("torch.cuda.memory", "a module reached through torch.cuda"),
    ("triton.knobs", "a module reached through triton"),
    ("triton.set_allocator", "a name outside the allow-list of triton"),
    ("torch.ops.load_library", "a name outside the allow-list of torch.ops"),
    ("triton.language._semantic", "a name outside the allow-list of triton.language"),
])
def test_attribute_paths_are_judged_by_namespace(path, problem):
    found = allowlist.attribute_problem(path)
    assert (found is None) if problem is None else (problem in found), found
