"""tools/bzl/test_tags.bzl: each test target's Bazel tags are its file's registered pytest markers."""

from __future__ import annotations

import importlib.util
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("bazel_test_tags", REPO_ROOT / "tools" / "bzl" / "test_tags.py")
tags_tool = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(tags_tool)

PYPROJECT = """
[tool.pytest.ini_options]
markers = ["slow: takes long", "gpu: needs a CUDA GPU"]
"""


def test_a_file_is_tagged_with_every_registered_marker_any_of_its_tests_carries(tmp_path):
    (tmp_path / "pyproject.toml").write_text(PYPROJECT)
    files = {
        "tests/a/test_module_mark.py": "import pytest\npytestmark = pytest.mark.slow\n",
        "tests/a/test_decorated.py": "import pytest\n@pytest.mark.gpu\n@pytest.mark.slow\ndef test_x(): pass\n",
        "tests/test_param.py": "import pytest\n@pytest.mark.parametrize('v', [pytest.param(1, marks=pytest.mark.gpu)])\n"
                               "def test_v(v): pass\n",
        "tests/test_unmarked.py": "import pytest\n@pytest.mark.timeout(5)\ndef test_y(): pass\n",
        "tests/helper.py": "import pytest\npytestmark = pytest.mark.slow\n",  # not a test file
    }
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    assert tags_tool.tags_by_file(tmp_path) == {
        "tests/a/test_decorated.py": ["gpu", "slow"],
        "tests/a/test_module_mark.py": ["slow"],
        "tests/test_param.py": ["gpu"],
    }


def test_the_committed_tags_match_the_markers():
    """Run `python tools/bzl/test_tags.py` after marking a test."""
    assert tags_tool.OUTPUT.read_text() == tags_tool.render(tags_tool.tags_by_file(REPO_ROOT))
