"""`multihost.broadcast_json` on 2 real processes (the harness of test_multiprocess.py): every process
receives process 0's value, even when process 0 arrives later than a device collective would wait."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from multiprocess_harness import run_workers

pytestmark = pytest.mark.slow

WORKER = Path(__file__).with_name("multihost_worker.py")
DELAY_S = 35  # past the 30 s after which gloo gives up on peers that have not joined a new communicator


def test_every_process_receives_process_0s_value_however_late_it_sends(tmp_path):
    results = run_workers(tmp_path / "two", 2, 2, str(DELAY_S), worker=WORKER)
    expected = [{"sender": 0, "text": "é" * 3000, "items": [1, 2.5, None, True]}, [0, 0, 0]]
    assert [json.loads(str(result["received"])) for result in results] == [expected, expected]
