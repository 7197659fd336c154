"""The `Inductor` call on the CPU: TorchInductor's Triton for the CPU device, converted, run by the Triton
interpreter, and judged by the strict verifier like any candidate; failures cost only their own process."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from sandbox_service.client import SandboxClient
from sandbox_service.evaluation import evaluate
from sandbox_service.inductor.request import compile_with_inductor
from sandbox_service.options import CandidateFormat, EvalOptions, InductorOptions, InputSet
from sandbox_service.results import InductorStatus, Status

pytestmark = pytest.mark.slow
FIXTURES = Path(__file__).resolve().parent / "fixtures"
REPO_ROOT = Path(__file__).resolve().parents[3]
VERIFY = EvalOptions(trials=2, time=False, candidate_format=CandidateFormat.CODE)
MODULE = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        {body}


def get_inputs():
    return [torch.randn(6, 40)]


def get_init_inputs():
    return []
"""


def reference(body: str) -> str:
    return MODULE.format(body=body)


def test_a_module_made_from_inductor_output_is_verified_on_other_shapes_too(cpu_lane):
    source = (FIXTURES / "norm_two_outputs.py").read_text()
    made = compile_with_inductor(source, InductorOptions(), cpu_lane)
    assert made.status == InductorStatus.OK, made.reason
    assert made.backend == "interpreter" and made.kernels >= 1 and "maximum" in made.helpers
    assert "torch._inductor" not in made.source and "libdevice" not in made.source.replace("helper_libdevice", "")
    other = InputSet("rows", "def get_inputs():\n    return [torch.randn(29, 48), torch.randn(29, 48)]\n")
    result = evaluate(source, made.source, VERIFY, cpu_lane, input_sets=(other,))
    assert result.status == Status.OK, (result.error, result.violations)
    # the module is a real candidate: the verifier still catches it breaking
    broken = made.source.replace("= helper_maximum(", "= helper_maximum(1.0 + ", 1)  # relu(x) -> max(1, x)
    assert broken != made.source
    assert evaluate(source, broken, VERIFY, cpu_lane).status == Status.INCORRECT


@pytest.mark.parametrize("body, reason", [
    ("return torch.relu(x @ x.t())", "extern_kernels|no Triton kernel"),
    ("raise RuntimeError('broken reference')", "broken reference"),
    ("return x.nonzero()", "Inductor did not compile|graph|extern|no Triton kernel|failed|raised"),
])
def test_what_inductor_cannot_turn_into_a_module_fails_with_its_reason(cpu_lane, body, reason):
    made = compile_with_inductor(reference(body), InductorOptions(), cpu_lane)
    assert made.status == InductorStatus.FAILED and not made.source
    assert __import__("re").search(reason, made.reason), made.reason


def test_a_reference_that_hangs_costs_a_timeout(cpu_lane):
    hang = reference("return x").replace("return [torch.randn(6, 40)]", "import time\n    time.sleep(60)\n"
                                                                         "    return [torch.randn(6, 40)]")
    made = compile_with_inductor(hang, InductorOptions(timeout_s=5), cpu_lane)
    assert made.status == InductorStatus.TIMEOUT and made.duration_s < 30


def test_the_client_and_the_cli_reach_the_call_through_the_server(server, tmp_path):
    with SandboxClient([server.address]) as client:
        made = client.inductor(reference("return torch.cumsum(x, dim=1).exp()"))
    assert made.status == InductorStatus.OK and made.kernels >= 1, made.reason
    path = tmp_path / "reference.py"
    path.write_text(reference("return torch.var(x, dim=1)"))
    out = tmp_path / "module.py"
    done = subprocess.run([sys.executable, "-m", "sandbox_service", "--log-level", "WARNING", "inductor", str(path),
                           "--target", server.address, "--verify", "--json", "--out", str(out)],
                          capture_output=True, text=True, cwd=REPO_ROOT, timeout=300)
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout)
    assert answer["status"] == "ok" and answer["verification"]["status"] == "ok"
    assert out.read_text() == answer["source"]
