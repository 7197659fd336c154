"""Layer 3, runtime: what the candidate's forward really does. The in-process design watches it from inside the
candidate's process (the rules below); the executor design never runs the candidate's forward where it could
matter, and the same candidates are not ok there either.

These candidates skip the static screen (run_isolated) so that each runtime rule is shown to hold on its own.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from sandbox_cases import FAST, REFERENCE, fixture_candidate
from sandbox_service.evaluation import run_isolated
from sandbox_service.results import Status
from sandbox_service.verifier.runtime import GLUE_OPS, HEAVY_OPS, RUNTIME_RULES

DOCS = Path(__file__).resolve().parents[3] / "docs" / "verifier_rules.md"


def rules_of(result) -> set[str]:
    return {v.rule for v in result.violations if v.layer == "runtime"}


def test_replacing_evaluator_functions_is_monkeypatching(in_process_lane):
    result = run_isolated(REFERENCE, fixture_candidate("patches_allclose"), FAST, in_process_lane)
    assert result.status == Status.CHEAT and "monkeypatch" in rules_of(result)


def test_tensor_subclass_outputs_are_flagged(in_process_lane):
    result = run_isolated(REFERENCE, fixture_candidate("tensor_subclass"), FAST, in_process_lane)
    assert result.status == Status.CHEAT and "output-tensor-subclass" in rules_of(result)


def test_a_tensor_subclass_output_is_not_ok_under_the_executor(cpu_lane):
    """(Patching torch.allclose or the reference's get_inputs in the candidate's own process changes nothing
    under the executor: the judge compares, the executor makes the inputs; those fixtures' kernels are correct.)"""
    result = run_isolated(REFERENCE, fixture_candidate("tensor_subclass"), FAST, cpu_lane)
    assert result.status != Status.OK, (result.status, result.error)


def test_every_runtime_rule_is_documented():
    section = DOCS.read_text().split("\n## Runtime layer (layer 3)\n", 1)[1].split("\n## ", 1)[0]
    documented = set(re.findall(r"^\| `([a-z0-9-]+)` \|", section, re.M))
    assert documented == set(RUNTIME_RULES)


def test_heavy_operators_are_never_glue():
    assert not GLUE_OPS & HEAVY_OPS


def test_unknown_rules_are_a_programming_error():
    import pytest
    import torch

    from sandbox_service.verifier.runtime import RuntimeMonitor

    with pytest.raises(KeyError):
        RuntimeMonitor(torch.device("cpu"))._add("made-up-rule", "x")


def test_tampering_with_later_trials_inputs_is_caught(in_process_lane):
    result = run_isolated(REFERENCE, fixture_candidate("swaps_get_inputs"), FAST, in_process_lane)
    assert result.status == Status.CHEAT and "inputs-tampered" in rules_of(result)


def test_input_comparison_treats_nan_as_equal_to_nan_and_sees_any_other_change(monkeypatch):
    import torch

    from sandbox_service.verifier import runtime

    monkeypatch.setattr(runtime, "_CHUNK", 7)  # several chunks: a change in any of them counts
    x = torch.randn(50)
    x[3] = float("nan")
    same, moved_nan, changed_last = x.clone(), x.clone(), x.clone()
    moved_nan[3], moved_nan[4] = 0.0, float("nan")
    changed_last[-1] += 1
    flags = [runtime._differs(x, same), runtime._differs(x, moved_nan), runtime._differs(x, changed_last),
             runtime._differs(x, x[:49]), runtime._differs(x, x.double()),
             runtime._differs(torch.arange(5), torch.arange(5)), runtime._differs(torch.arange(5), torch.arange(1, 6))]
    assert runtime._any_true(flags) == [False, True, True, True, True, False, True]
