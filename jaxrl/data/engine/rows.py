"""The rows of the build's outputs: an SFT pair (sft.jsonl) and an RL task (rl_tasks.jsonl).

An SFT row is TRL's conversational prompt-completion layout: `prompt` holds the chat messages evaluation
builds for the task (`prompts.build_messages`), `completion` one assistant message in the answer format
(`prompts.format_answer(code, plan)`), so `jaxrl.data.sft_data.read_jsonl` reads it and SFT trains on
exactly the prompt the policy is evaluated with. An RL row is the task in KernelBench form plus its input
sets and what validation measured; `jaxrl.data.task_source` reads it back.
"""

from __future__ import annotations

from typing import Any

from jaxrl.data.engine.sandbox_api import InductorResult, status_name
from jaxrl.data.engine.tasks import GeneratedTask, TeacherSolution
from jaxrl.data.prompts import Message, build_messages, format_answer
from sandbox_service.results import EvalResult, ValidationResult


def prompt_messages(task: GeneratedTask) -> list[Message]:
    return build_messages(task.code)


def answer_text(solution: TeacherSolution) -> str:
    """The completion an SFT pair teaches; the sandbox verifies this text, not the bare module."""
    return format_answer(solution.code, solution.plan)


def inductor_solution(task: GeneratedTask, result: InductorResult) -> TeacherSolution:
    """An Inductor module as a teacher solution, with a plan that says where it came from."""
    ops = " -> ".join(task.ops) or task.family
    plan = (f"Lower {ops} the way TorchInductor does: {result.kernels} Triton kernel(s) with explicit grids, "
            "launched in order from ModelNew.forward.")
    return TeacherSolution(plan=plan, code=result.source, origin="inductor")


def verdict_summary(result: EvalResult) -> dict[str, Any]:
    """The part of a verification verdict an SFT row keeps."""
    return {
        "status": status_name(result.status),
        "trials": result.trials,
        "trials_passed": result.trials_passed,
        "max_abs_error": result.max_abs_error,
        "backend": result.backend,
        "device": result.device,
    }


def validation_summary(result: ValidationResult) -> dict[str, Any]:
    """The reference's median time on its own inputs (None untimed) and the peak memory of any input set."""
    return {
        "ref_time_us": result.ref_time_us,
        "peak_memory_mb": max((r.peak_memory_mb for r in result.input_sets), default=None),
        "backend": result.backend,
        "device": result.device,
    }


def sft_row(task: GeneratedTask, split: str, solution: TeacherSolution, verdict: EvalResult,
            tokens: tuple[int, int]) -> dict[str, Any]:
    return {
        "prompt": prompt_messages(task),
        "completion": [{"role": "assistant", "content": answer_text(solution)}],
        "task_id": task.task_id,
        "family": task.family,
        "ops": list(task.ops),
        "difficulty": task.difficulty,
        "dtype": task.dtype,
        "split": split,
        "origin": solution.origin,
        "verdict": verdict_summary(verdict),
        "tokens": {"prompt": tokens[0], "completion": tokens[1]},
    }


def rl_row(task: GeneratedTask, split: str, validation: ValidationResult) -> dict[str, Any]:
    return {
        "task_id": task.task_id,
        "family": task.family,
        "ops": list(task.ops),
        "composition": task.composition,
        "difficulty": task.difficulty,
        "dtype": task.dtype,
        "scale": task.scale,
        "split": split,
        "code": task.code,
        "input_sets": [s.to_dict() for s in task.input_sets],
        "validation": validation_summary(validation),
    }


def pair_tokens(row: dict[str, Any]) -> int:
    """Prompt plus completion tokens of an SFT row."""
    return row["tokens"]["prompt"] + row["tokens"]["completion"]
