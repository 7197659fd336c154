"""Run a function in a forked child that entered the jail first; return how it ended and what it said."""

from __future__ import annotations

import dataclasses
import json
import os
import sys
import traceback


@dataclasses.dataclass
class Outcome:
    returncode: int
    said: dict
    reports: list

    @property
    def killed_by_seccomp(self) -> bool:
        return self.returncode == -31  # SIGSYS


def run_jailed(body, writable: str, seal: bool = True) -> Outcome:
    """`body()` returns a JSON-able dict; it runs after confine_files([writable]) and, with `seal`, seal()."""
    from sandbox_service import jail

    read_fd, write_fd = os.pipe()
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        code = 0
        reports: list = []
        try:
            os.close(read_fd)
            problems = jail.confine_files([writable])
            if seal:
                jail.seal([writable], lambda rule, message: reports.append([rule, message]))
            said = body()
            said["problems"] = problems
        except BaseException as exc:  # noqa: BLE001 - reported to the parent
            said, code = {"error": f"{type(exc).__name__}: {exc}", "trace": traceback.format_exc()}, 1
        os.write(write_fd, json.dumps({"said": said, "reports": reports}).encode())
        os._exit(code)
    os.close(write_fd)
    chunks = []
    while chunk := os.read(read_fd, 65536):
        chunks.append(chunk)
    os.close(read_fd)
    _, status = os.waitpid(pid, 0)
    data = json.loads(b"".join(chunks) or b'{"said": {}, "reports": []}')
    return Outcome(os.waitstatus_to_exitcode(status), data["said"], data["reports"])
