"""Who is calling: the source file of the nearest frame that is not torch's own or the monitor's.

Torch routes a call through its own Python (dispatch wrappers, `Storage.cpu`, `Tensor.__array__`) before
the monitor sees it, so the frame that tells whose work it is comes first outside those. Frames are told
apart by their code's file, which candidate code cannot rename without `compile`/`exec` (a static rule);
its module's `__name__` it could.
"""

from __future__ import annotations

import os
import sys

import torch

TORCH_DIR = os.path.dirname(torch.__file__) + os.sep
MONITOR_DIR = os.path.dirname(__file__) + os.sep


def _triton_dir() -> str | None:
    try:
        import triton
    except ImportError:
        return None
    return os.path.dirname(triton.__file__) + os.sep


TRUSTED_DIRS = tuple(d for d in (TORCH_DIR, _triton_dir(), MONITOR_DIR) if d)


def is_trusted_file(filename: str) -> bool:
    """Torch's, Triton's or the monitor's own code (Triton's autotuner reads timings with `.tolist()` on some
    versions; the monitor reads the dispatch-mode stack)."""
    return filename.startswith(TRUSTED_DIRS)


def nearest_caller_file() -> str:
    """The file of the first frame above our caller that is neither torch nor the monitor."""
    frame = sys._getframe(2)
    while frame is not None:
        filename = frame.f_code.co_filename
        if not filename.startswith((TORCH_DIR, MONITOR_DIR)):
            return filename
        frame = frame.f_back
    return ""


def interpreter_file() -> str | None:
    """Triton's interpreter module, whose launches stage memory with torch operators (None without it)."""
    try:
        from triton.runtime import interpreter
    except ImportError:
        return None
    return interpreter.__file__
