"""Fixtures of the attack tests: whatever an attack started and is still alive is killed after each test."""

from __future__ import annotations

import pytest

from attack_support import kill_survivors


@pytest.fixture(autouse=True)
def survivors_killed():
    yield
    kill_survivors()
