"""Red-team pass on the executor design (docs/security.md, "The executor design"). Each test asserts the secure
behaviour, so each FAILS while its attack works. Every candidate here computes ReLU outside Triton's language
(NumPy in the executor, on the tensors' raw addresses) or turns its own evaluation into `infra_error`.

- kernels.py checks a module attribute chain only when its root is a plain module name: a local alias
  (`t = triton`) or any other expression rooting the chain (`(triton if True else tl).runtime...`) reaches
  `builtins.exec` in the trusted executor (at run time under the interpreter; at compile time on a GPU,
  where Triton's front end calls any Python callable it resolves);
- the CPU interpreter re-reads a kernel's lines and runs them from the *last* line starting with `def `
  (string literals included), so the tree kernels.py checked is not what runs;
- the tracer cuts a kernel's source from the first line matching `^def name(` in `inspect.getsource`, which
  includes decorators: a string in a decorator carries the kernel the executor gets, while the static layer
  reads the honest one;
- the server sends programs of up to 16 MB in a job message, but frames are capped at 8 MB: `infra_error`;
- check_program tests membership of unchecked values: a list where a ref belongs raises TypeError, which the
  server does not catch: `infra_error`.
"""

from __future__ import annotations

from attack_support import FAST, RELU, candidate, dedicated_lane, describe
from sandbox_service.evaluation import evaluate, run_isolated
from sandbox_service.lane import EXECUTOR_DESIGN
from sandbox_service.results import Status


def executor_lane():
    return dedicated_lane(design=EXECUTOR_DESIGN)


def _rules(result) -> set[str]:
    return {v.rule for v in result.violations}


def test_a_kernel_aliasing_a_module_to_a_local_cannot_reach_exec():
    with executor_lane() as lane:
        result = run_isolated(RELU, candidate("redteam_kernel_aliases_module_to_exec"), FAST, lane)
    assert result.status == Status.CHEAT, describe(result)
    assert "illegal-kernel" in _rules(result), describe(result)


def test_a_kernel_rooting_an_attribute_chain_on_an_expression_cannot_reach_exec():
    with executor_lane() as lane:
        result = run_isolated(RELU, candidate("redteam_kernel_attribute_chain_off_an_expression"), FAST, lane)
    assert result.status == Status.CHEAT, describe(result)
    assert "illegal-kernel" in _rules(result), describe(result)


def test_the_interpreter_runs_the_kernel_that_was_checked_not_a_def_in_its_docstring():
    with executor_lane() as lane:
        isolated = run_isolated(RELU, candidate("redteam_interpreter_runs_the_last_def"), FAST, lane)
        full = evaluate(RELU, candidate("redteam_interpreter_runs_the_last_def"), FAST, lane)
    assert isolated.status != Status.OK, describe(isolated)
    assert full.status != Status.OK, describe(full)


def test_the_kernel_the_executor_gets_is_the_one_the_static_layer_read():
    with executor_lane() as lane:
        isolated = run_isolated(RELU, candidate("redteam_kernel_source_smuggled_in_decorator"), FAST, lane)
        full = evaluate(RELU, candidate("redteam_kernel_source_smuggled_in_decorator"), FAST, lane)
    assert isolated.status != Status.OK, describe(isolated)
    assert full.status != Status.OK, describe(full)


def test_a_program_too_big_for_the_executor_s_channel_is_the_candidate_s_failure_not_infra_error():
    with executor_lane() as lane:
        isolated = run_isolated(RELU, candidate("redteam_program_too_big_for_the_executor"), FAST, lane)
        full = evaluate(RELU, candidate("redteam_program_too_big_for_the_executor"), FAST, lane)
    assert isolated.status not in (Status.OK, Status.INFRA_ERROR), describe(isolated)
    assert full.status not in (Status.OK, Status.INFRA_ERROR), describe(full)


def test_a_forged_program_with_an_unhashable_ref_is_malformed_not_infra_error():
    with executor_lane() as lane:
        result = run_isolated(RELU, candidate("redteam_program_with_unhashable_ref"), FAST, lane)
    assert result.status == Status.CHEAT, describe(result)
    assert "malformed-program" in _rules(result), describe(result)
