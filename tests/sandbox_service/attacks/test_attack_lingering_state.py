"""Attack class 3, state that outlives the candidate: a process started in a new session survives the process-group
kill; the lane's work root (other evaluations' folders), the template's working folder (the first entry of every
forked process's import path) and the trusted launcher cache are writable by candidates.

Properties: nothing a candidate started is alive after its evaluation, and one candidate cannot change later
verdicts: on the same lane the next honest evaluations are `ok` and the next wrong ones `incorrect`. The attacks
run through `run_isolated` (the static layer would reject fork/open): the process isolation must hold on its own.
Each test builds its own lane and closes it."""

from __future__ import annotations

import sysconfig
from pathlib import Path

from attack_support import (
    FAST, RELU, RELU_WITH_SCIPY, assert_properties, attempted, candidate, dedicated_lane, describe, lane_still_judges,
    nothing_survives,
)
from sandbox_service.evaluation import run_isolated
from sandbox_service.worker.builder import Builder


def test_daemon_started_in_a_new_session_does_not_outlive_the_evaluation():
    """setsid + double fork in __init__; the daemon only sleeps. It must be gone once the evaluation returns."""
    with dedicated_lane() as lane:
        result = run_isolated(RELU, candidate("session_daemon"), FAST, lane)
        survived = nothing_survives()
        later = lane_still_judges(lane)
    assert attempted(result), f"the attack did not run: {describe(result)}"
    assert_properties(survived, later)


def test_daemon_rewriting_later_candidates_sources_cannot_change_their_verdicts():
    """A surviving daemon swaps the ReLU store and the identity store in every later job folder's candidate.py."""
    with dedicated_lane() as lane:
        result = run_isolated(RELU, candidate("daemon_rewrites_later_candidates"), FAST,
                              lane)
        survived = nothing_survives()
        later = lane_still_judges(lane)
    assert attempted(result), f"the attack did not run: {describe(result)}"
    assert_properties(survived, later)


def test_module_planted_on_the_template_import_path_cannot_change_a_later_references_outputs():
    """`scipy.py` in the template's working folder: a later reference importing scipy patches torch.relu in the
    judge. The later evaluations use that reference (problems/relu_with_scipy.py)."""
    with dedicated_lane() as lane:
        result = run_isolated(RELU, candidate("plants_module_on_import_path"), FAST, lane)
        later = lane_still_judges(lane, reference=RELU_WITH_SCIPY)
    assert attempted(result), f"the attack did not run: {describe(result)}"
    assert_properties(later)


def test_file_planted_in_the_trusted_launcher_cache_is_never_handed_out():
    """The candidate writes `trusted-builds/<key>/<name><suffix>` for a C source under the builder's content key;
    the trusted builder (its `build`, driven here directly: the CPU lane starts no builder and this machine has no
    CUDA driver for its configuration) must not answer with the planted file."""
    name, source = "launcher_probe", "int launcher_probe(void) { return 42; }\n"
    config = {"library_dirs": [], "include_dirs": [sysconfig.get_paths()["include"]], "libraries": []}
    payload = b"\x7fELF planted by a candidate"
    with dedicated_lane() as lane:
        result = run_isolated(RELU, candidate("plants_trusted_build", NAME=repr(name),
                                              SOURCE=repr(source), CONFIG=repr(config), PAYLOAD=repr(payload)),
                              FAST, lane)
        builder = Builder.__new__(Builder)  # Builder.__init__ asks Triton's CUDA driver for its configuration
        builder.root, builder.config, builder.built = lane._trusted_builds, config, {}
        builder.root.mkdir(parents=True, exist_ok=True)  # as the builder's serve() does (the candidate could not)
        answer = builder.build({"name": name, "source": source, **config})
        handed_out = Path(answer["path"]).read_bytes() if answer.get("type") == "built" else b""
    assert attempted(result), f"the attack did not run: {describe(result)}"
    assert handed_out != payload, f"the trusted builder handed out the candidate's planted file {answer['path']}"
