"""Layer 1, format: find the candidate code and check that it is a Triton answer at all.

Runs in a screen worker process of the server (screen_pool.py) on source text only; nothing is executed.
"""

from __future__ import annotations

import ast
import dataclasses

from sandbox_service import ast_parse
from sandbox_service.options import CandidateFormat
from sandbox_service.results import Violation
from sandbox_service.verifier.extraction import extract_completion, looks_like_completion

LAYER = "format"


@dataclasses.dataclass(frozen=True)
class FormatCheck:
    """The code that later layers run (None when there is none) and what is wrong with it."""

    code: str | None
    tree: ast.Module | None
    violations: list[Violation]


def _decorator_name(node: ast.expr) -> str:
    """Dotted name of a decorator, with any call stripped: `triton.autotune(...)` -> 'triton.autotune'."""
    if isinstance(node, ast.Call):
        node = node.func
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
    return ".".join(reversed(parts))


def triton_kernel_names(tree: ast.Module) -> list[str]:
    """Functions decorated with `triton.jit` (also under `triton.autotune`/`heuristics`, or `from triton import jit`)."""
    names = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            decorators = {_decorator_name(d) for d in node.decorator_list}
            if decorators & {"triton.jit", "jit", "tl.jit", "triton.language.jit"}:
                names.append(node.name)
    return names


def _defines_model_new(tree: ast.Module) -> bool:
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == "ModelNew":
            return True
        if isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Name) and t.id == "ModelNew" for t in targets):
                return True
    return False


def check_format(candidate_text: str, candidate_format: CandidateFormat, max_bytes: int) -> FormatCheck:
    def fail(rule: str, message: str, line: int | None = None) -> FormatCheck:
        return FormatCheck(None, None, [Violation(LAYER, rule, message, line)])

    if len(candidate_text.encode("utf-8", errors="replace")) > max_bytes:
        return fail("too-large", f"candidate is larger than {max_bytes} bytes")
    use_fence = candidate_format == CandidateFormat.COMPLETION or (
        candidate_format == CandidateFormat.AUTO and looks_like_completion(candidate_text)
    )
    code = candidate_text
    if use_fence:
        extraction = extract_completion(candidate_text)
        if extraction.code is None:
            return fail("no-code-block", extraction.problem)
        code = extraction.code
    if not code.strip():
        return fail("empty-code", "the code block is empty")
    try:
        tree = ast_parse.parse(code)
    except SyntaxError as exc:
        return FormatCheck(code, None, [Violation(LAYER, "syntax-error", f"does not parse: {exc.msg}", exc.lineno)])
    except (ValueError, RecursionError, MemoryError) as exc:
        return FormatCheck(code, None, [Violation(LAYER, "syntax-error", f"does not parse: {type(exc).__name__}")])
    violations = []
    if not _defines_model_new(tree):
        violations.append(Violation(LAYER, "no-model-new", "no top-level class ModelNew"))
    if not triton_kernel_names(tree):
        violations.append(Violation(LAYER, "no-triton-kernel", "no @triton.jit kernel is defined"))
    return FormatCheck(code, tree, violations)
