"""Fixtures of the data tests."""

from __future__ import annotations

import pytest

from jaxrl.data import kernelbench_source


@pytest.fixture
def isolated(monkeypatch, tmp_path):
    """No KernelBench anywhere: the checkout's sibling ../shared, the cache and the URL all point into
    tmp_path, and downloading is off."""
    for name in ("KERNELBENCH_JSONL", "TRITONRL_SHARED_DIR", "KERNELBENCH_URL", "XDG_CACHE_HOME"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("TRITONRL_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("TRITONRL_NO_DOWNLOAD", "1")
    monkeypatch.setattr(kernelbench_source, "REPO_ROOT", tmp_path / "checkout")
    return tmp_path
