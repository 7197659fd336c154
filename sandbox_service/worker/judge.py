"""The judge: a long-lived process per lane that runs only trusted code (the references) and compares.

It keeps problems loaded and caches, per (reference and input sets, seed, trials), the reference's input
and output fingerprints and, within a memory budget, its expected outputs; the reference's timings are
cached per method. A group of candidates for one task therefore loads and times the reference once. A
`compare` with a `seed` (the executor design's trials and timing checks, new to each evaluation) makes that
trial's inputs and expected outputs then, and answers with their fingerprints; a timing check's also has a
`sample_seed`: the executor handed over the elements it names (harness.sample_indices), compared alone.
Large expected outputs are not kept: each trial is recomputed when the candidate's outputs for it arrive,
so no more than one trial of a large problem is in memory at a time.

Candidate code never runs here. The judge reads candidate outputs (a file, or CUDA IPC handles while the
candidate is frozen) and compares them; the server decides the verdict. If the judge dies it is started
again with empty caches: nothing it computed before is trusted after a restart.

Requests (JSON, with an `id` echoed in the answer): prepare, compare, time, stats. `prepare` carries the
reference's source and input sets themselves (never a path: a candidate may be able to write files).
`compare` carries a hand-over the candidate described: it is checked again here (the server checked it
first), a file is opened without following symlinks and only inside the evaluation's outputs folder, and
anything wrong with it is answered `malformed` (the candidate's doing) rather than raised. Every request
runs in its own error boundary: no request, however malformed, ends this process.
"""

from __future__ import annotations

import collections
import dataclasses
import time
from typing import Any

import torch

from sandbox_service import correctness
from sandbox_service.options import DEFAULT_TOLERANCE
from sandbox_service.worker import handover, harness, messages, protocol

CACHE_BYTES = {"cuda": 4 << 30, "interpreter": 1 << 30}
MAX_PROBLEMS = 64
RESERVED_LIMIT_BYTES = 2 << 30
# An outputs file may be this many times the reference's outputs (a wrong dtype) plus headers; larger is not
# read at all (incorrect).
FILE_SLACK_FACTOR = 8
FILE_SLACK_BYTES = 16 << 20


class BadRequest(Exception):
    """A request that is not what the protocol says (a bug in the server, never a candidate's input)."""


def _failure(exc: BaseException) -> BaseException:
    """What a reference's exception becomes: out of GPU memory stays itself (the lane waits and tries again:
    other processes may hold the memory for a while), anything else is the reference's failure."""
    if isinstance(exc, torch.cuda.OutOfMemoryError):
        return exc
    return ReferenceFailure(harness.format_exception(exc))


class ReferenceFailure(Exception):
    """The reference raised, produced non-finite outputs, or otherwise cannot be judged against."""


@dataclasses.dataclass
class Problem:
    key: str
    sets: list[tuple[str, Any]]
    seeds: list[int]
    seed: int
    models: list[torch.nn.Module]
    tolerance_table: dict[str, tuple[float, float]]
    degenerate_rel_l2: float
    input_fingerprints: list[list[str]]
    output_fingerprints: list[list[str]]
    degenerate: list[list[bool]]
    expected: dict[tuple[int, int], list[torch.Tensor]]
    input_bytes: int = 0
    output_bytes: int = 0
    cached_bytes: int = 0
    timings: dict[tuple, dict] = dataclasses.field(default_factory=dict)

    def tolerances(self, dtype: str) -> tuple[float, float]:
        return self.tolerance_table.get(dtype, DEFAULT_TOLERANCE)


class Judge:
    def __init__(self, backend: str):
        self.backend = backend
        self.device = harness.device_for(backend)
        self.problems: collections.OrderedDict[str, Problem] = collections.OrderedDict()
        self.budget = CACHE_BYTES.get(backend, 1 << 30)
        self.counts = collections.Counter()

    # -- prepare -------------------------------------------------------------------------------
    def prepare(self, request: dict) -> dict:
        key = request["key"]
        problem = self.problems.get(key)
        if problem is None:
            self.counts["prepare_miss"] += 1
            problem = self._load(request)
            self.problems[key] = problem
            self._evict()
        else:
            self.counts["prepare_hit"] += 1
        self.problems.move_to_end(key)
        return {
            "type": "prepared",
            "input_fingerprints": problem.input_fingerprints,
            "output_fingerprints": problem.output_fingerprints,
            "degenerate": [any(flags) for flags in problem.degenerate],
            "set_names": [name for name, _ in problem.sets],
            "input_bytes": problem.input_bytes,
            "output_bytes": problem.output_bytes,
            "device": harness.device_name(self.backend),
        }

    def _load(self, request: dict) -> Problem:
        seed, trials = int(request["seed"]), int(request["trials"])
        source = request["reference_source"]
        if not isinstance(source, str):
            raise BadRequest("prepare without the reference's source")
        try:
            sets = harness.problem_sets_from_source(source, f"<reference {request['key'][:16]}>",
                                                    request["input_sets"], seed)
            models = []
            for _, module in sets:
                init = harness.init_inputs(module, seed, self.device)
                models.append(harness.build_model(module, "Model", init, seed, self.device).eval())
        except BaseException as exc:  # noqa: BLE001 - a broken reference is reported, never fatal here
            raise _failure(exc) from None
        problem = Problem(
            key=request["key"], sets=sets, seeds=harness.trial_seeds(seed, trials, str(request.get("trial_key", ""))), seed=seed, models=models,
            tolerance_table={k: tuple(v) for k, v in request["tolerances"].items()},
            degenerate_rel_l2=float(request["degenerate_rel_l2"]), input_fingerprints=[], output_fingerprints=[],
            degenerate=[], expected={},
        )
        keep = True
        for set_index in range(len(sets)):
            problem.input_fingerprints.append([])
            problem.output_fingerprints.append([])
            bands: list[list[correctness.Band]] = []
            for trial in range(trials):
                inputs, outputs = self._run(problem, set_index, trial)
                problem.input_fingerprints[-1].append(harness.fingerprint([inputs]))
                problem.output_fingerprints[-1].append(harness.fingerprint([outputs]))
                problem.input_bytes = max(problem.input_bytes, handover.total_bytes(
                    [t for t in inputs if isinstance(t, torch.Tensor)]))
                size = handover.total_bytes(outputs)
                problem.output_bytes = max(problem.output_bytes, size)
                bands.append(correctness.degenerate_bands(outputs, problem.tolerances))
                keep = keep and problem.cached_bytes + size <= self.budget // 4
                if keep:
                    problem.expected[(set_index, trial)] = outputs
                    problem.cached_bytes += size
                del inputs, outputs  # a large problem holds one trial at a time
                self.tidy()
            problem.degenerate.append(correctness.degenerate_from_bands(bands))
        return problem

    def _run(self, problem: Problem, set_index: int, trial: int, seed: int | None = None
             ) -> tuple[list, list[torch.Tensor]]:
        module = problem.sets[set_index][1]
        try:
            inputs = harness.trial_inputs(module, problem.seeds[trial] if seed is None else seed, self.device)
            with torch.no_grad():
                outputs = [t.detach() for t in harness.flatten_outputs(problem.models[set_index](*inputs))]
            harness.synchronize(self.device)
        except BaseException as exc:  # noqa: BLE001
            raise _failure(exc) from None
        if not all(correctness.all_finite(t) for t in outputs):
            raise ReferenceFailure("the reference produced NaN or Inf outputs")
        return inputs, outputs

    def _evict(self) -> None:
        while len(self.problems) > MAX_PROBLEMS or (
            len(self.problems) > 1 and sum(p.cached_bytes for p in self.problems.values()) > self.budget
        ):
            self.problems.popitem(last=False)

    # -- compare -------------------------------------------------------------------------------
    def compare(self, request: dict) -> dict:
        problem = self.problems.get(request["key"])
        if problem is None:
            return {"type": "unknown_problem"}
        set_index, trial, seed = request["set"], request["trial"], request.get("seed")
        # A timing check (`seed`: new to the evaluation) is handed over as a trial after the prepared ones.
        trials = len(problem.seeds) + (messages.MAX_TIMING_CHECKS if seed is not None else 0)
        if (type(set_index) is not int or type(trial) is not int or not 0 <= set_index < len(problem.sets)
                or not 0 <= trial < trials or (seed is not None and (type(seed) is not int or not 0 < seed < 2**31))):
            return _malformed(f"no input set {set_index!r} trial {trial!r} in this task")
        sample_seed = request.get("sample_seed")
        if sample_seed is not None and (seed is None or type(sample_seed) is not int or not 0 <= sample_seed < 2**63):
            return _malformed(f"a sample seed {sample_seed!r} where none or a timing check's was due")
        want = problem.expected.get((set_index, trial)) if seed is None else None
        made: dict = {}  # for a seed new to this evaluation: what the judge made, for the server to check against
        if want is None:
            self.counts["recompute" if seed is None else "fresh_seed"] += 1
            inputs, want = self._run(problem, set_index, trial, seed)
            if seed is not None:
                made = {"input_fingerprint": harness.fingerprint([inputs]),
                        "expected_fingerprint": harness.fingerprint([want])}
            del inputs
        if sample_seed is not None:  # a timing check: the elements the executor copied after that run
            picked = harness.sample_indices([w.numel() for w in want], sample_seed)
            want = [w.reshape(-1)[i.to(w.device)] for w, i in zip(want, picked)]
        ipc = isinstance(request.get("handover"), dict) and request["handover"].get("kind") == handover.IPC
        try:
            got = self._import(request, problem, set_index, trial, ipc)
        except messages.Malformed as exc:
            return _malformed(exc.error)
        except handover.Unmapped as exc:
            return {"type": "ipc_failed", "error": str(exc)}
        except torch.cuda.OutOfMemoryError:
            raise
        except Exception as exc:  # noqa: BLE001 - unreadable outputs are the candidate's
            return {"type": "compared", "passed": False, "max_abs_error": None,
                    "message": f"outputs unreadable: {type(exc).__name__}: {str(exc)[:500]}", "fingerprint": None,
                    **made}
        try:
            result = correctness.compare_trial(want, got, problem.tolerances, problem.degenerate[set_index],
                                               problem.degenerate_rel_l2)
            received = harness.fingerprint([got])
        except torch.cuda.OutOfMemoryError:
            raise
        except Exception as exc:  # noqa: BLE001 - outputs that cannot even be compared are wrong outputs
            return {"type": "compared", "passed": False, "max_abs_error": None,
                    "message": f"outputs could not be compared: {type(exc).__name__}: {str(exc)[:500]}",
                    "fingerprint": None, **made}
        finally:
            del got, want
            if self.device.type == "cuda" and ipc:
                torch.cuda.ipc_collect()
        return {"type": "compared", **result.__dict__, "fingerprint": received, **made}

    def _import(self, request: dict, problem: Problem, set_index: int, trial: int, ipc: bool) -> list[torch.Tensor]:
        try:
            return handover.import_outputs(
                request["handover"], self.device, outputs_dir=request["outputs_dir"], set_index=set_index,
                trial=trial, ipc_min_bytes=request["ipc_min_bytes"],
                max_file_bytes=FILE_SLACK_FACTOR * problem.output_bytes + FILE_SLACK_BYTES)
        except BaseException:
            if self.device.type == "cuda" and ipc:
                torch.cuda.ipc_collect()  # let go of the handles mapped before one was refused
            raise

    # -- timing --------------------------------------------------------------------------------
    def time_reference(self, request: dict) -> dict:
        from sandbox_service import timing

        problem = self.problems.get(request["key"])
        if problem is None:
            return {"type": "unknown_problem"}
        lead_us = float(request["lead_us"]) if request.get("lead_us") else None
        cache_key = (request["method"], int(request["warmup"]), int(request["runs"]), bool(request.get("fresh_inputs")),
                     lead_us)
        if cache_key not in problem.timings or request.get("remeasure"):
            self.counts["time_miss"] += 1
            module, model = problem.sets[0][1], problem.models[0]
            # Fresh inputs: made before every run from its own seed (as the executor times candidates).
            seeds = harness.trial_seeds(problem.seed, cache_key[2], "reference timing") if cache_key[3] else None
            current = {} if seeds is not None else {
                "inputs": harness.trial_inputs(module, problem.seeds[0], self.device)}

            def before_run(index: int) -> None:
                if seeds is not None:
                    current.clear()
                    current["inputs"] = harness.trial_inputs(module, seeds[index], self.device)

            try:
                stats = timing.time_cuda(lambda: model(*current["inputs"]), warmup=cache_key[1], runs=cache_key[2],
                                         method=cache_key[0], before_run=before_run, lead_us=lead_us)
            except BaseException as exc:  # noqa: BLE001
                raise _failure(exc) from None
            problem.timings[cache_key] = stats.__dict__
            current.clear()
        else:
            self.counts["time_hit"] += 1
        return {"type": "timed", "stats": problem.timings[cache_key]}

    def tidy(self) -> None:
        """Give cached GPU memory back between requests: candidates need it more than our allocator."""
        if self.device.type == "cuda" and torch.cuda.memory_reserved() > RESERVED_LIMIT_BYTES:
            torch.cuda.empty_cache()

    def trim(self, request: dict) -> dict:
        """Give back every expected output kept and all the allocator caches: an evaluation waits for GPU memory
        (Lane.relieve_memory). The tasks stay prepared; their trials are recomputed when compared, as large
        ones always are."""
        freed = 0
        for problem in self.problems.values():
            freed += problem.cached_bytes
            problem.expected.clear()
            problem.cached_bytes = 0
        if self.device.type == "cuda":
            torch.cuda.empty_cache()
        self.counts["trims"] += 1
        return {"type": "trimmed", "expected_bytes": freed}


def _malformed(error: str) -> dict:
    return {"type": "malformed", "rule": messages.HANDOVER_RULE, "error": error}


def answer(judge: Judge, request: dict) -> dict:
    """One request's answer. Nothing a request holds ends the judge: a broken reference, an out-of-memory,
    a malformed hand-over and a malformed request each get their answer."""
    handlers = {"prepare": judge.prepare, "compare": judge.compare, "time": judge.time_reference,
                "trim": judge.trim}
    op = request.get("op")
    try:
        if op == "stats":
            return {"type": "stats", "counts": dict(judge.counts), "problems": len(judge.problems)}
        if op in handlers:
            return handlers[op](request)
        return {"type": "error", "kind": "protocol", "error": f"unknown op {op!r}"}
    except ReferenceFailure as exc:
        judge.problems.pop(request.get("key"), None)
        return {"type": "error", "kind": "reference", "error": str(exc)}
    except torch.cuda.OutOfMemoryError as exc:
        # A prepared task stays: running out of memory says nothing against it, and the lane tries again.
        if judge.device.type == "cuda":
            torch.cuda.empty_cache()
        # What was refused, when torch says: the lane waits until the GPU has that much free before trying again.
        return {"type": "error", "kind": "memory", "error": f"out of GPU memory in the judge: {exc}",
                "requested": harness.refused_bytes(exc)}
    except Exception as exc:  # noqa: BLE001 - a bad request (or a bug here) is answered, never fatal
        judge.counts["request_errors"] += 1
        return {"type": "error", "kind": "protocol",
                "error": f"the judge could not answer {op!r}: {type(exc).__name__}: {str(exc)[:1000]}"}


def serve(backend: str, control: protocol.Receiver, report_fd: int) -> int:
    judge = Judge(backend)
    while True:
        try:
            request = control.receive()
        except protocol.ChannelClosed:
            return 0
        except protocol.ProtocolError as exc:
            # Only the trusted server writes here (candidates' messages are checked and rebuilt before they
            # reach a request), and it cannot send such a frame; after one the channel cannot be trusted.
            protocol.send(report_fd, {"type": "error", "kind": "protocol", "error": str(exc), "id": None})
            return 1
        started = time.monotonic()
        reply = answer(judge, request)
        try:
            judge.tidy()
        except Exception:  # noqa: BLE001 - giving memory back is best effort
            pass
        reply["id"] = request.get("id")
        reply["duration_s"] = round(time.monotonic() - started, 6)
        protocol.send(report_fd, reply)
