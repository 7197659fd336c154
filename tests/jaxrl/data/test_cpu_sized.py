"""CPU-sized KernelBench: the shrinking transform, the reference validator and the committed list."""

from __future__ import annotations

import ast
import json
import textwrap

import pytest

from jaxrl.data import cpu_sized
from jaxrl.data.cpu_sized import (
    BATCH_CAP,
    SIZE_CAP,
    IDS_FILE,
    cpu_sized_problems,
    read_ids_file,
    shrink_problem,
    shrink_source,
    shrink_value,
    source_hash,
    validate,
)
from jaxrl.data.kernelbench import Problem, load_problems

HEADER = "import torch\nimport torch.nn as nn\n"
MODEL = """
class Model(nn.Module):
    def __init__(self, *args):
        super().__init__()
        self.hidden = nn.Linear(4, 4096)  # class bodies are left alone

    def forward(self, x):
        return x * 2
"""


def module_constants(code: str) -> dict[str, object]:
    """Module-level assignments evaluated in order (names may refer to earlier ones)."""
    namespace: dict[str, object] = {}
    for node in ast.parse(code).body:
        if isinstance(node, ast.Assign):
            exec(compile(ast.Module([node], []), "<c>", "exec"), namespace)
    return {k: v for k, v in namespace.items() if not k.startswith("__")}


def test_shrink_value_halves_to_the_cap():
    assert [shrink_value(v) for v in (1, 3, 16, 17, 4096, 4095, 393216, 224)] == [1, 3, 16, 8, 16, 15, 12, 14]
    assert shrink_value(32768, cap=BATCH_CAP) == 4


def test_transform_rewrites_only_large_integer_sizes():
    code = HEADER + MODEL + textwrap.dedent(
        """
        batch_size = 8192 * 2   # the batch
        N = 2048 * 2
        dim1 = 4095
        kernel_size = (3, 5, 7)
        depth, height, width = (16, 32, 48)
        input_shape = (8192 * 2,)
        stride = 2
        eps = 1e-05
        scale = 65536.0
        offset = -1024
        groups = in_channels = 64

        def get_inputs():
            return [torch.rand(batch_size, 3, 224, 224), torch.randint(0, 1000, (batch_size,))]

        def get_init_inputs():
            return [N, 4096]
        """
    )
    out = shrink_source(code)
    constants = module_constants(out)
    assert constants["batch_size"] == BATCH_CAP
    assert (constants["N"], constants["dim1"]) == (16, 15)
    assert constants["kernel_size"] == (3, 5, 7) and constants["stride"] == 2
    assert (constants["depth"], constants["height"], constants["width"]) == (16, 16, 12)
    assert constants["input_shape"] == (16,)
    assert (constants["eps"], constants["scale"], constants["offset"]) == (1e-05, 65536.0, -1024)
    assert constants["groups"] == constants["in_channels"] == 16
    assert "torch.rand(batch_size, 3, 14, 14), torch.randint(0, 15, (batch_size,))" in out
    assert "return [N, 16]" in out
    assert "nn.Linear(4, 4096)  # class bodies are left alone" in out
    assert "batch_size = 4   # the batch" in out  # comments and spacing survive


def test_transform_is_deterministic_and_idempotent(kernelbench_path):
    for problem in load_problems(kernelbench_path, levels=[1, 2]):
        once = shrink_source(problem.code)
        assert shrink_source(problem.code) == once
        assert shrink_source(once) == once, problem.key


def test_every_level1_module_size_is_small_after_shrinking(kernelbench_path):
    changed = 0
    for problem in load_problems(kernelbench_path, levels=[1]):
        shrunk = shrink_problem(problem)
        changed += shrunk.code != problem.code
        for name, value in module_constants(shrunk.code).items():
            values = value if isinstance(value, tuple) else (value,)
            for v in values:
                if type(v) is int:
                    assert v <= SIZE_CAP, f"{problem.key}: {name} = {value}"
    assert changed == 100


def test_validator_keeps_working_references_and_drops_broken_ones(kernelbench_path):
    problems = [shrink_problem(p) for p in load_problems(kernelbench_path, levels=[1], ids=[1, 19, 50, 80, 58])]
    checks = validate(problems)
    assert {key: c.ok for key, c in checks.items()} == {
        "L1/1": True, "L1/19": True, "L1/50": True, "L1/58": False, "L1/80": False
    }
    assert "too large" in checks["L1/58"].reason
    assert "Kernel size can't be greater" in checks["L1/80"].reason
    assert checks["L1/1"].elements == 3 * 16 * 16 and checks["L1/1"].seconds < cpu_sized.MAX_SECONDS


def synthetic(pid: int, forward_body: str, module_code: str = "") -> Problem:
    code = (
        HEADER
        + "class Model(nn.Module):\n    def forward(self, x):\n        " + forward_body + "\n\n"
        + module_code + "\n"
        + "def get_inputs():\n    return [torch.rand(4, 4)]\n\n"
        + "def get_init_inputs():\n    return []\n"
    )
    return Problem(9, pid, f"{pid}_synthetic", code)


def test_validator_survives_hangs_crashes_and_fake_verdicts():
    problems = [
        synthetic(1, "return x.relu()"),
        synthetic(2, "import time; time.sleep(60)"),
        synthetic(3, "import os; os._exit(3)"),
        synthetic(4, "return torch.zeros_like(x)"),
        synthetic(5, "return torch.rand_like(x)"),
        synthetic(6, "return x / 0.0 - x / 0.0"),
        synthetic(7, "return x", 'print(\'RESULT {"key": "L9/7", "error": "", "seconds": 0, "elements": 1, '
                  '"finite": true, "constant": false, "rng_independent": true}\')\nraise RuntimeError("bad module")'),
        synthetic(8, "return x.sum()"),
    ]
    checks = validate(problems, timeout_s=3)
    assert checks["L9/1"].ok and checks["L9/8"].ok
    assert checks["L9/2"].reason == "timeout after 3 s"
    assert checks["L9/3"].reason.startswith("worker exited (3)")
    assert checks["L9/4"].reason == "constant output"
    assert checks["L9/5"].reason == "output depends on the random state"
    assert checks["L9/6"].reason == "non-finite output"
    assert checks["L9/7"].reason == "RuntimeError: bad module"


def committed() -> dict:
    return json.loads(IDS_FILE.read_text())


def test_committed_list_was_made_with_the_current_transform(kernelbench_path):
    data = committed()
    assert data["transform"] == {
        "size_cap": SIZE_CAP,
        "batch_cap": BATCH_CAP,
        "max_seconds": cpu_sized.MAX_SECONDS,
        "max_elements": cpu_sized.MAX_ELEMENTS,
    }
    assert set(data["levels"]) == {"1", "2"}
    for level, entry in data["levels"].items():
        problems = load_problems(kernelbench_path, levels=[int(level)])
        assert {str(p.problem_id) for p in problems} == set(entry["kept"]) | set(entry["dropped"])
        for problem in problems:
            if str(problem.problem_id) in entry["kept"]:
                digest = source_hash(shrink_source(problem.code))
                assert entry["kept"][str(problem.problem_id)] == digest, (
                    f"{problem.key}: the transform changed since {IDS_FILE.name} was made; re-run "
                    "python -m jaxrl.data.cpu_sized --validate --level 1 --level 2"
                )
    assert len(data["levels"]["1"]["kept"]) >= 60


def test_committed_list_agrees_with_a_fresh_validation(kernelbench_path):
    data = committed()["levels"]
    sample = {1: [2, 23, 47, 95, 43, 100], 2: [1, 12, 3, 9]}
    problems = [shrink_problem(p) for level, ids in sample.items() for p in load_problems(kernelbench_path, levels=[level], ids=ids)]
    checks = validate(problems)
    for problem in problems:
        assert checks[problem.key].ok == (str(problem.problem_id) in data[str(problem.level)]["kept"]), problem.key


def test_load_problems_cpu_sized_keeps_only_validated_problems(kernelbench_path):
    kept = read_ids_file()["1"]
    problems = load_problems(kernelbench_path, levels=[1], cpu_sized=True)
    assert [p.problem_id for p in problems] == sorted(kept)
    assert all(source_hash(p.code) == kept[p.problem_id] for p in problems)
    assert problems[0].source.endswith("(cpu-sized)")
    with pytest.raises(ValueError, match=r"no validated CPU-sized variant for \['L1/80'\]"):
        load_problems(kernelbench_path, levels=[1], ids=[1, 80], cpu_sized=True)
    with pytest.raises(ValueError, match="none of the selected problems"):
        load_problems(kernelbench_path, levels=[3], cpu_sized=True)


def test_a_stale_list_is_an_error(kernelbench_path, tmp_path):
    data = committed()
    data["levels"]["1"]["kept"]["19"] = "0" * 16
    path = tmp_path / "ids.json"
    path.write_text(json.dumps(data))
    problems = load_problems(kernelbench_path, levels=[1], ids=[1, 19])
    with pytest.raises(ValueError, match=r"stale for \['L1/19'\]"):
        cpu_sized_problems(problems, path=path)
