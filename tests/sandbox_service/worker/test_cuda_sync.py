"""The CUDA children's synchronisation policy: chosen by the server's TRITONRL_CUDA_SYNC, checked, and set on the
driver before the child's context exists."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from sandbox_service.worker import cuda_sync
from sandbox_service.worker.process import base_environment


def test_the_default_leaves_the_driver_s_own_choice():
    assert cuda_sync.policy_from_env({}) == "auto"
    assert cuda_sync.POLICIES["auto"] == 0
    cuda_sync.set_policy("auto")  # touches no driver: this machine may have none


def test_a_policy_is_read_case_blind_and_an_unknown_one_is_an_error_that_names_the_variable():
    assert cuda_sync.policy_from_env({cuda_sync.SYNC_ENV: " Blocking "}) == "blocking"
    with pytest.raises(ValueError, match="TRITONRL_CUDA_SYNC='sleep'"):
        cuda_sync.policy_from_env({cuda_sync.SYNC_ENV: "sleep"})


def test_cuda_children_inherit_the_server_s_policy_and_interpreter_children_get_none(monkeypatch, tmp_path: Path):
    monkeypatch.setenv(cuda_sync.SYNC_ENV, "blocking")
    assert base_environment("cuda", 0, tmp_path, 1)[cuda_sync.SYNC_ENV] == "blocking"
    assert cuda_sync.SYNC_ENV not in base_environment("interpreter", None, tmp_path, 1)
    monkeypatch.setenv(cuda_sync.SYNC_ENV, "nap")
    with pytest.raises(ValueError):
        base_environment("cuda", 0, tmp_path, 1)


@pytest.mark.gpu
@pytest.mark.parametrize("policy", ["spin", "blocking"])
def test_the_policy_is_the_flag_of_the_context_torch_then_uses(policy):
    probe = textwrap.dedent(f"""
        import ctypes, torch
        from sandbox_service.worker import cuda_sync
        cuda_sync.set_policy({policy!r})
        torch.empty(1, device="cuda")
        flags = ctypes.c_uint()
        assert ctypes.CDLL("libcuda.so.1").cuCtxGetFlags(ctypes.byref(flags)) == 0
        print(flags.value & 7)
    """)
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120,
                          cwd=Path(__file__).resolve().parents[3])
    assert done.returncode == 0, done.stderr
    assert int(done.stdout.strip()) == cuda_sync.POLICIES[policy]
