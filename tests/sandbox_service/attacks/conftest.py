"""Fixtures of the attack tests: a record folder whose survivors are killed (by pid) after each test."""

from __future__ import annotations

import pytest

from attack_support import kill_survivors


@pytest.fixture
def record_dir(tmp_path):
    folder = tmp_path / "started"
    folder.mkdir()
    yield folder
    kill_survivors(folder)
