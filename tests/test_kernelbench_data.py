"""The shared KernelBench copy in tests: skipped with a how-to in a user's bare clone, a failure in CI."""

from __future__ import annotations

import pytest

import kernelbench_data


@pytest.fixture
def no_copy(monkeypatch, tmp_path):
    """A machine with no shared KernelBench beside the checkout, outside CI."""
    monkeypatch.setattr(kernelbench_data, "REPO_ROOT", tmp_path / "clone")
    monkeypatch.delenv("TRITONRL_SHARED_DIR", raising=False)
    monkeypatch.delenv("CI", raising=False)
    return tmp_path


def test_a_bare_clone_skips_with_a_reason_that_says_how_to_get_the_data(no_copy):
    with pytest.raises(pytest.skip.Exception) as skipped:
        kernelbench_data.shared_kernelbench()
    reason = str(skipped.value)
    assert str(no_copy / "shared" / "datasets" / "kernelbench.jsonl") in reason
    assert "set TRITONRL_SHARED_DIR" in reason


@pytest.mark.parametrize("variable, value", [("TRITONRL_SHARED_DIR", "{tmp}/empty"), ("CI", "true")])
def test_ci_fails_instead_of_skipping(no_copy, monkeypatch, variable, value):
    monkeypatch.setenv(variable, value.format(tmp=no_copy))
    with pytest.raises(pytest.fail.Exception, match=kernelbench_data.MISSING):
        kernelbench_data.shared_kernelbench()


def test_the_copy_beside_the_checkout_is_found(no_copy):
    path = no_copy / "shared" / "datasets" / "kernelbench.jsonl"
    path.parent.mkdir(parents=True)
    path.write_text('{"level": 1, "problem_id": 1, "name": "x", "code": ""}\n')
    assert kernelbench_data.shared_kernelbench() == path
