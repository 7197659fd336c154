"""Fixtures of the policy-side tests."""

from tiny_hf import tiny_checkpoint  # noqa: F401 - a fixture
