"""A child's environment names its GPU as the machine does, whatever the server itself was allowed to see."""

from __future__ import annotations

from pathlib import Path

import pytest

from sandbox_service.worker.process import base_environment, visible_device


def test_without_a_restriction_the_server_s_gpu_number_is_the_machine_s(monkeypatch):
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    assert visible_device(1) == "1"


def test_under_a_cluster_s_allocation_gpu_0_is_the_allocation_s_first_entry(monkeypatch, tmp_path: Path):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2, 3")
    assert [visible_device(0), visible_device(1)] == ["2", "3"]
    assert base_environment("cuda", 1, tmp_path, 1)["CUDA_VISIBLE_DEVICES"] == "3"
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "GPU-8a1f,GPU-77c0")
    assert visible_device(1) == "GPU-77c0"


def test_a_gpu_outside_the_allocation_is_an_error_not_another_gpu(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "5")
    with pytest.raises(ValueError, match="GPU 1 is not among"):
        visible_device(1)


def test_the_interpreter_s_children_see_no_gpu(monkeypatch, tmp_path: Path):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2")
    assert base_environment("interpreter", None, tmp_path, 1)["CUDA_VISIBLE_DEVICES"] == ""


def test_an_empty_entry_ends_the_list_as_it_does_for_cuda(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", ",2,3")
    with pytest.raises(ValueError):
        visible_device(0)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,,3")
    assert visible_device(0) == "2"
    with pytest.raises(ValueError):
        visible_device(2)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,3,")
    assert visible_device(1) == "3"
