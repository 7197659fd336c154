"""Layer 2, static: AST rules on the candidate source, in a trusted screen worker (screen_pool.py); nothing runs.

`check_static` follows what `ModelNew.forward` calls inside the candidate module (helpers, methods,
modules it owns, autograd Functions, lambdas), tracking which names hold input tensors, tensors,
Python scalars or identity keys, and reports each broken rule with its line. @triton.jit bodies are
kernels: tl.* is fine there. Comments, docstrings and names never trigger a rule; aliases, imports
and literal getattr are resolved. Where the type of a value cannot be known statically, the rule is
not applied: precision first, the runtime layer sees every torch operator that actually runs.

Rules and their ids: `RULES` (sandbox_service/verifier/static/rules.py); docs/verifier_rules.md.
"""

from __future__ import annotations

import ast
import logging

from sandbox_service import ast_parse
from sandbox_service.options import Policy
from sandbox_service.results import Violation
from sandbox_service.verifier.static.interpreter import LAYER, AnalysisBudgetExceeded
from sandbox_service.verifier.static.program import Program
from sandbox_service.verifier.static.rules import RULES, RuleInfo, applies

__all__ = ["RULES", "RuleInfo", "check_static"]

log = logging.getLogger(__name__)


def reference_uses_low_precision(reference_source: str | None) -> bool:
    """Whether the problem itself works in 16-bit floats (then casting to them is no downgrade)."""
    if not reference_source:
        return False
    try:
        tree = ast_parse.parse(reference_source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False
    for node in ast.walk(tree):
        name = node.attr if isinstance(node, ast.Attribute) else node.value if isinstance(node, ast.Constant) else None
        if isinstance(name, str) and name in ("float16", "half", "bfloat16"):
            return True
    return False


def check_static(code: str, policy: Policy = Policy.STRICT, reference_source: str | None = None) -> list[Violation]:
    """Violations of the static rules enforced under `policy`, sorted by line; [] when the code does not parse
    (the format layer reports that). With the reference's source, casts to a 16-bit float type that the
    reference itself uses are allowed (global precision flags and autocast stay flagged)."""
    policy = Policy(policy)
    try:
        tree = ast_parse.parse(code)
    except (SyntaxError, ValueError):
        return []
    except (RecursionError, MemoryError):
        return [_unanalysable("the source is nested too deeply to parse")]
    try:
        found = Program(tree, allow_low_precision_casts=reference_uses_low_precision(reference_source)).run()
    except (RecursionError, AnalysisBudgetExceeded) as exc:
        return [_unanalysable(f"the analysis did not finish: {type(exc).__name__}")]
    except Exception as exc:  # noqa: BLE001 - a candidate must never crash the trusted parent
        log.exception("static analysis failed")
        return [_unanalysable(f"the analysis failed: {type(exc).__name__}: {exc}")]
    return [v for v in found if applies(v.rule, policy)]


def _unanalysable(message: str) -> Violation:
    return Violation(layer=LAYER, rule="unanalysable", message=message, line=0)
