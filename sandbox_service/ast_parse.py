"""One Python parse at a time in a process: CPython 3.11 and 3.12 keep the AST constructor's recursion depth per
interpreter, not per thread, so two threads making AST objects at once can raise a spurious SystemError ("AST
constructor recursion depth mismatch", python/cpython#106905). The server checks candidates' programs in many
threads, and an honest program came back a malformed one (`cheat`) in CI. Every parse of trusted code goes through
`parse`; the GIL serialises the conversion anyway, so the lock costs next to nothing."""

from __future__ import annotations

import ast
import threading

_LOCK = threading.Lock()


def parse(source: str, mode: str = "exec") -> ast.AST:
    with _LOCK:
        return ast.parse(source, mode=mode)
