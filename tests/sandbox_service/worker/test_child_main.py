"""A long-lived child's start-up objects are out of the collector's sight before its first job."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def test_after_settling_a_collection_walks_only_what_was_made_since():
    probe = textwrap.dedent("""
        import gc, torch
        from sandbox_service.worker import child_main
        before = len(gc.get_objects(generation=2))
        child_main.settle_heap()
        after = len(gc.get_objects(generation=2))
        made = [[i] for i in range(1000)]
        gc.collect()
        print(before, after, gc.get_freeze_count(), len(gc.get_objects(generation=2)))
    """)
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    before, after, frozen, later = map(int, done.stdout.split())
    assert before > 20_000 and frozen > 0.9 * before  # torch's objects (less the garbage collected first)
    assert after < 100 and 1_000 <= later < 2_000  # a collection now sees the new objects only
