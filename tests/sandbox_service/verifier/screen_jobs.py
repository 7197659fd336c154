"""Jobs for test screen workers (ScreenPool(job="screen_jobs:marked")): the real screens, unless the text carries
a marker that makes the worker misbehave at a chosen point. Imported in the worker process only."""

from __future__ import annotations

import json
import os
import signal
import sys
import time

from sandbox_service.jail import privileges
from sandbox_service.verifier.screen_worker import screen


def _spin() -> None:
    while True:
        pass


def marked(request: dict, send) -> None:
    """SPIN_FORMAT / SPIN_STATIC: spin on the CPU before the format answer / after it; SLEEP_LONG /
    SLEEP_SHORT: sleep 30 s / 1.5 s off the CPU before it; DIE_STATIC: the process kills itself after the
    format answer; RAISE: an exception escapes; REPORT_PATH: the format layer passes with `code` saying where
    the worker imports from and whether it is dumpable."""
    text = request["candidate"]
    if "REPORT_PATH" in text:
        where = {"path": sys.path, "cwd": os.getcwd(), "dumpable": privileges.is_dumpable()}
        send({"type": "format", "code": json.dumps(where), "violations": []})
        send({"type": "static", "violations": []})
        return
    if "RAISE" in text:
        raise KeyError("a bug in a layer")
    if "SPIN_FORMAT" in text:
        _spin()
    if "SLEEP_LONG" in text:
        time.sleep(30)
    if "SLEEP_SHORT" in text:
        time.sleep(1.5)

    def relay(message: dict) -> None:
        send(message)
        if message["type"] == "format" and "SPIN_STATIC" in text:
            _spin()
        if message["type"] == "format" and "DIE_STATIC" in text:
            os.kill(os.getpid(), signal.SIGKILL)

    screen(request, relay)
