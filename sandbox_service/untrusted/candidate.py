"""The jailed candidate process's job: import the candidate, build `ModelNew`, trace its forward.

Runs with no GPU and no input values (sandbox_service/untrusted/tracer.py). Writes the launch program
(`program.json`) and its constants (`constants.safetensors`) into its own folder and says `program`; the
server reads both from there and hands them to an executor. Everything this process says or writes is the
candidate's: the executor checks it (sandbox_service/interface/program.py, sandbox_service/executor/).

Messages (each with the evaluation's nonce): program | unsupported | rejected (a forward whose work changes
from one call to the next) | compile_error | runtime_error.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable

import torch

from sandbox_service.interface.program import Unsupported
from sandbox_service.untrusted import tracer
from sandbox_service.worker import harness
from sandbox_service.worker.protocol import Receiver

Emit = Callable[..., None]
PROGRAM_FILE = "program.json"
CONSTANTS_FILE = "constants.safetensors"


def run(job: dict, emit: Emit, control: Receiver) -> None:
    cpu = torch.device("cpu")
    tracer.install_cuda_stand_ins(job["device_properties"])
    sets = harness.load_problem_sets(job["reference_path"], job["input_sets"], job["seed"])
    with tracer.cuda_facade():
        init = [harness.init_inputs(module, job["seed"], cpu) for _, module in sets]
    phase = "import"
    try:
        with tracer.cuda_facade():
            candidate = harness.load_module(job["candidate_path"], "tritonrl_candidate")
        phase = "construction"

        def model(index: int) -> torch.nn.Module:
            harness.seed_everything(job["seed"])
            with tracer.cuda_facade():
                return getattr(candidate, "ModelNew")(*init[index])

        models = [model(i) for i in range(len(sets))]
    except BaseException as exc:  # noqa: BLE001 - anything the candidate raises, SystemExit included
        emit("compile_error", phase=phase, error=harness.format_exception(exc))
        return
    try:
        program, constants = tracer.trace(lambda i: models[i],
                                          lambda i: harness.trial_inputs(sets[i][1], job["seed"], cpu), len(sets))
    except Unsupported as exc:
        emit("unsupported", error=str(exc))
        return
    except tracer.StatefulForward as exc:
        emit("rejected", rule="work-skipped-when-timed", error=str(exc))
        return
    except BaseException as exc:  # noqa: BLE001
        emit("runtime_error", phase="forward (traced)", error=harness.format_exception(exc))
        return
    folder = os.getcwd()
    if constants:
        from safetensors.torch import save_file

        save_file(constants, os.path.join(folder, CONSTANTS_FILE))
    with open(os.path.join(folder, PROGRAM_FILE), "w") as f:
        json.dump(program, f)
    emit("program")
