"""Shared pieces of the attack tests: a dedicated lane per test, the relu problem of the corpus with an honest
and a wrong kernel, candidate loading with placeholders, the checks run after an attack (later verdicts on the
same lane, nothing the attack started still alive), and the clean-up of what survived.

The properties every attack test asserts (a verdict is computed only by trusted code from evidence trusted code
produced; an untrusted process may be taken over completely and the worst it can do is fail its own evaluation):
- a candidate that does not do the work in Triton never comes back `ok`;
- after a cross-evaluation attack the same lane still judges: honest kernels `ok`, wrong ones `incorrect`,
  and a malformed message never yields `infra_error` for its sender;
- nothing a candidate started is alive after its evaluation.

Every process an attack starts names itself `atk-...` (prctl PR_SET_NAME), so that the test can tell whether
one is still alive and kill it afterwards. An attack reports what it tried on its stdout (`attempted-...`
lines), which the test reads from the evaluation's stdout tail: a jailed candidate writes no file outside its
own folder, and no verdict ever reads its output.
"""

from __future__ import annotations

import contextlib
import os
import signal
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from sandbox_service.evaluation import evaluate
from sandbox_service.lane import Lane
from sandbox_service.options import EvalOptions
from sandbox_service.results import EvalResult, Status

HERE = Path(__file__).resolve().parent
CANDIDATES = HERE / "candidates"
CORPUS = HERE.parent / "corpus"

RELU = (CORPUS / "problems" / "relu.py").read_text()
HONEST = (CORPUS / "honest" / "relu_flatten.py").read_text()
WRONG = (CANDIDATES / "relu_wrong_identity.py").read_text()
RELU_WITH_SCIPY = (HERE / "problems" / "relu_with_scipy.py").read_text()

# Two trials keep the interpreter quick. The attacks that poison a task's cache use the same options as the
# evaluations after them (the task key includes seed, trials and tolerances).
FAST = EvalOptions(trials=2, timeout_s=20, memory_limit_mb=4096)
LATER_RUNS = 10  # honest and wrong evaluations after each cross-evaluation attack (about 0.2 s each here)

# Every candidate the attacks include to reach the harness's objects in their own process.
_REACH = (CANDIDATES / "_reach.py").read_text()
_HONEST_RELU = (CANDIDATES / "_honest_relu_model.py").read_text()


def candidate(name: str, **placeholders: str) -> str:
    """A candidate file, with `# INCLUDE _reach` (the shared helpers) and `# INCLUDE _honest_relu_model` (an honest
    ReLU kernel) inlined and __NAME__ placeholders filled."""
    source = (CANDIDATES / f"{name}.py").read_text().replace("# INCLUDE _reach\n", _REACH)
    source = source.replace("# INCLUDE _honest_relu_model\n", _HONEST_RELU)
    for key, value in placeholders.items():
        source = source.replace(f"__{key}__", value)
    return source


@contextlib.contextmanager
def dedicated_lane(warm: int = 1, design: str | None = None) -> Iterator[Lane]:
    """A lane of its own (cross-evaluation attacks must not poison other tests' lanes), closed afterwards;
    `design` as in Lane.create (the server's default when None)."""
    with tempfile.TemporaryDirectory(prefix="tritonrl-attack-lane-") as root:
        lane = Lane.create("interpreter", None, warm=warm, work_root=Path(root), design=design)
        try:
            yield lane
        finally:
            lane.close()


def describe(result: EvalResult) -> str:
    return (f"{result.status.value} trials {result.trials_passed}/{result.trials} "
            f"violations {[v.rule for v in result.violations]} error {result.error[:300]!r}")


def later_verdicts(lane: Lane, reference: str = RELU, runs: int = LATER_RUNS,
                   options: EvalOptions = FAST) -> tuple[list[EvalResult], list[EvalResult]]:
    honest = [evaluate(reference, HONEST, options, lane) for _ in range(runs)]
    wrong = [evaluate(reference, WRONG, options, lane) for _ in range(runs)]
    return honest, wrong


def lane_still_judges(lane: Lane, reference: str = RELU, runs: int = LATER_RUNS,
                      options: EvalOptions = FAST) -> str | None:
    """None when the next `runs` honest evaluations are ok and the next `runs` wrong ones incorrect on this lane;
    otherwise what went wrong."""
    honest, wrong = later_verdicts(lane, reference, runs, options)
    bad_honest = [describe(r) for r in honest if r.status != Status.OK]
    bad_wrong = [describe(r) for r in wrong if r.status != Status.INCORRECT]
    if not bad_honest and not bad_wrong:
        return None
    return (f"after the attack {len(bad_honest)}/{runs} honest evaluations were not ok {bad_honest[:2]}; "
            f"{len(bad_wrong)}/{runs} wrong evaluations were not incorrect {bad_wrong[:2]}")


def not_ok(result: EvalResult) -> str | None:
    if result.status == Status.OK:
        return f"an attack that does not do the work in Triton came back ok: {describe(result)}"
    return None


def not_infra_error(result: EvalResult) -> str | None:
    if result.status in (Status.OK, Status.INFRA_ERROR):
        return f"the sender of a malformed message got {describe(result)} (expected cheat or another own failure)"
    return None


def assert_properties(*findings: str | None) -> None:
    """Every property checked, every broken one reported (not only the first)."""
    broken = [f for f in findings if f]
    assert not broken, "\n".join(broken)


def assert_not_ok(result: EvalResult) -> None:
    assert_properties(not_ok(result))


# -- what the attack started ---------------------------------------------------------------------------------
ATTACK_PREFIX = "atk-"


def survivors() -> list[str]:
    """Processes an attack started that are still alive (named `atk-...`, not zombies)."""
    alive = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except (FileNotFoundError, ProcessLookupError, PermissionError):
            continue
        name = stat[stat.index("(") + 1: stat.rindex(")")]
        state = stat[stat.rindex(")") + 2:].split()[0]
        if name.startswith(ATTACK_PREFIX) and state != "Z":
            alive.append(f"{entry} ({name}, state {state})")
    return alive


def kill_survivors() -> None:
    """Clean-up after the assertion: kill what an attack started and is still alive."""
    for described in survivors():
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(int(described.split()[0]), signal.SIGKILL)


def attempted(result: EvalResult) -> list[str]:
    """What the attack reports having tried (its code ran), from its stdout: a precondition that holds whether or
    not the sandbox blocks the attack, so that a sandbox which stops it passes the test. An evaluation the jail
    ended at once may end before its stdout was read: the jail's own finding then shows the code ran."""
    said = {line.removeprefix("attempted-") for line in result.stdout_tail.splitlines()
            if line.startswith("attempted-")}
    if not said and any(v.layer == "jail" for v in result.violations):
        said = {"stopped-by-the-jail"}
    return sorted(said)


def nothing_survives(grace_s: float = 2.0) -> str | None:
    """None when no process an attack started is alive (after `grace_s` for SIGKILLs in flight)."""
    deadline = time.monotonic() + grace_s
    while survivors() and time.monotonic() < deadline:
        time.sleep(0.1)
    alive = survivors()
    if alive:
        return f"processes the candidate started are alive {grace_s:.0f} s after its evaluation: {alive}"
    return None
