"""The trusted builder (CUDA lanes) runs gcc, unjailed and with no memory watchdog, on C source that the candidate
writes: `build_request.source` is whatever the candidate's process sends (harness.install_remote_build's hook is
callable by the candidate with any source), and the builder checks only its size and the module's name.
The preprocessor follows `#include "/absolute/path"` wherever the builder's user can read:
- a FIFO in the candidate's own folder: gcc blocks in open() until someone writes, so the builder answers nobody for
  BUILD_TIMEOUT_S (120 s; every other evaluation's build waits behind the lock), then it is killed and the
  attacker's evaluation ends `infra_error` (the trainer masks it);
- /dev/zero: cc1 reads until memory runs out (the builder has no memory limit);
- files only the builder may read (on a root server, /proc/PID/environ of undumpable processes: gcc holds every
  capability), which come back in the compiler's error text inside the verdict.

BREACH. Driven here on the builder's own `build` (the CPU lane starts no builder, and this machine has no CUDA
driver for its configuration), with the FIFO where a candidate would put it."""

from __future__ import annotations

import os
import sysconfig
import tempfile
import threading
from pathlib import Path

from sandbox_service.worker.builder import Builder

ANSWER_WITHIN_S = 15.0


def test_the_trusted_builder_answers_a_source_that_includes_a_fifo_in_bounded_time():
    config = {"library_dirs": [], "include_dirs": [sysconfig.get_paths()["include"]], "libraries": []}
    with tempfile.TemporaryDirectory(prefix="tritonrl-attack-builder-") as root:
        candidate_folder = Path(root) / "tritonrl-candidate-x"
        candidate_folder.mkdir()
        fifo = candidate_folder / "header.h"
        os.mkfifo(fifo)
        builder = Builder.__new__(Builder)  # Builder.__init__ asks Triton's CUDA driver for its configuration
        builder.root, builder.config, builder.built = Path(root) / "trusted-builds", config, {}
        builder.root.mkdir()
        answers: list[dict] = []
        source = f'#include "{fifo}"\nint launcher_probe(void) {{ return 0; }}\n'
        worker = threading.Thread(target=lambda: answers.append(
            builder.build({"name": "launcher_probe", "source": source, **config})), daemon=True)
        worker.start()
        worker.join(ANSWER_WITHIN_S)
        stuck = worker.is_alive()
        if stuck:  # let gcc go: open the FIFO's other end and close it (end of file)
            os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
            worker.join(30)
    assert not stuck, (f"the trusted builder was still compiling a source that includes a FIFO after "
                       f"{ANSWER_WITHIN_S:.0f} s (gcc blocks opening it); answer after release: {answers}")
