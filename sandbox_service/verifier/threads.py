"""Threads started after installation run under an op recorder of their own.

Torch's dispatch modes live in thread-local state: a recorder entered on the forward's thread sees nothing
that another thread does. Every Python thread starts through one of `_thread`'s starters (threading.Thread,
concurrent.futures and multiprocessing.pool.ThreadPool included; `threading` keeps its own reference, taken
when it was imported), so wrapping them gives each new thread a recorder for its whole life.
"""

from __future__ import annotations

import _thread
import threading
from collections.abc import Callable
from contextlib import AbstractContextManager

# Python 3.11/3.12 start threads with start_new_thread, 3.13 with start_joinable_thread; both take the function first.
_STARTERS = [
    (_thread, "start_new_thread"), (_thread, "start_new"), (_thread, "start_joinable_thread"),
    (threading, "_start_new_thread"), (threading, "_start_joinable_thread"),
]


def _present() -> list[tuple[object, str]]:
    return [(owner, name) for owner, name in _STARTERS if hasattr(owner, name)]


def record_new_threads(make_recorder: Callable[[], AbstractContextManager]) -> None:
    def recorded(function):
        def run(*args, **kwargs):
            with make_recorder():
                return function(*args, **kwargs)

        return run

    def wrap(original):
        return lambda function, *args, **kwargs: original(recorded(function), *args, **kwargs)

    for owner, name in _present():
        setattr(owner, name, wrap(getattr(owner, name)))


def thread_starters() -> dict[str, object]:
    """The current starters by name, for the monitor's snapshot of functions that must not change."""
    return {f"{owner.__name__}.{name}": getattr(owner, name) for owner, name in _present()}
