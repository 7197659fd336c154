"""Diagnostics: with TRITONRL_PROFILE_DIR set, each one-shot child leaves a profile and the list of modules it
imported itself, and the template's warm-up leaves it nothing to import but the problem's own modules."""

from __future__ import annotations

import pstats
import tempfile
from pathlib import Path

import pytest

from sandbox_cases import CORRECT, FAST, REFERENCE
from sandbox_service.evaluation import evaluate
from sandbox_service.lane import IN_PROCESS_DESIGN, Lane
from sandbox_service.results import Status
from sandbox_service.worker.zygote_main import PROFILE_ENV

# A child must import these itself: the reference, the candidate, and Triton's per-signature launcher.
OWN_MODULES = ("tritonrl_reference", "tritonrl_candidate", "__triton_launcher")


@pytest.fixture(scope="module")
def profiled(tmp_path_factory):
    folder = tmp_path_factory.mktemp("profiles")
    with pytest.MonkeyPatch.context() as patch, tempfile.TemporaryDirectory(prefix="tritonrl-test-lane-") as root:
        patch.setenv(PROFILE_ENV, str(folder))
        lane = Lane.create("interpreter", None, warm=0, work_root=Path(root), design=IN_PROCESS_DESIGN)
        try:
            result = evaluate(REFERENCE, CORRECT, FAST, lane)
        finally:
            lane.close()
    return folder, result


def test_a_candidate_leaves_a_readable_profile(profiled):
    folder, result = profiled
    assert result.status == Status.OK
    profiles = list(folder.glob("candidate-*.prof"))
    assert len(profiles) == 1
    assert pstats.Stats(str(profiles[0])).total_calls > 0


def test_children_import_nothing_the_template_could_have(profiled):
    folder, _ = profiled
    imported = [name for path in folder.glob("candidate-*.modules") for name in path.read_text().split()]
    assert imported, "no module list written"
    assert [name for name in imported if not name.startswith(OWN_MODULES)] == []
