"""The device-profile summary: kernel kinds by name, time per step and device from an XSpace trace."""

from __future__ import annotations

import pytest
from jax.profiler import ProfileData

from benchmarks import device_profile

GEMM, SDPA, FUSION, NCCL = (
    "sm90_xmma_gemm_bf16bf16_bf16f32", "cudnn_generated_fort_native_sdpa_sm90_flash_fprop",
    "loop_multiply_fusion_3", "ncclDevKernel_AllGather_RING_LL",
)


def _event(metadata_id: int, ms: float) -> str:
    return f"events {{ metadata_id: {metadata_id} offset_ps: 0 duration_ps: {int(ms * 1e9)} }}"


def _plane(plane_id: int, name: str, lines: dict[str, list[tuple[int, float]]]) -> str:
    body = "".join(f'lines {{ id: {i} name: "{line}" {" ".join(_event(m, ms) for m, ms in events)} }} '
                   for i, (line, events) in enumerate(lines.items(), 1))
    metadata = "".join(f'event_metadata {{ key: {i} value {{ id: {i} name: "{n}" }} }} '
                       for i, n in enumerate((GEMM, SDPA, FUSION, NCCL), 1))
    return f'planes {{ id: {plane_id} name: "{name}" {body} {metadata} }}'


@pytest.fixture
def trace_dir(tmp_path):
    """Two steps on two GPUs; the derived "XLA Ops" line and the host plane must not count."""
    gpu = {"Stream #13(Compute)": [(1, 30.0), (2, 10.0), (3, 4.0), (1, 30.0), (2, 10.0), (3, 4.0)],
           "Stream #20(Nccl)": [(4, 2.0), (4, 2.0)],
           "XLA Ops": [(1, 500.0)]}
    space = " ".join([_plane(1, "/device:GPU:0", gpu), _plane(2, "/device:GPU:1", gpu),
                      _plane(3, "/host:CPU", {"python": [(3, 900.0)]})])
    data = ProfileData.text_proto_to_serialized_xspace(space)
    folder = tmp_path / "plugins" / "profile" / "run"
    folder.mkdir(parents=True)
    (folder / "host.xplane.pb").write_bytes(data)
    return tmp_path


def test_kernels_are_put_in_kinds_by_name():
    assert [device_profile.kind_of(k) for k in (GEMM, SDPA, FUSION, NCCL, "Memcpy DtoD")] == [
        "matmul", "attention", "other", "collective", "copy"]


def test_summary_is_per_step_and_device_from_stream_lines_only(trace_dir):
    summary = device_profile.summarise(trace_dir, steps=2)
    assert summary.devices == 2
    assert summary.by_kernel == pytest.approx({GEMM: 30.0, SDPA: 10.0, FUSION: 4.0, NCCL: 2.0})
    assert summary.by_kind == pytest.approx({"matmul": 30.0, "attention": 10.0, "other": 4.0, "collective": 2.0})
    assert list(summary.by_kind) == ["matmul", "attention", "other", "collective"]  # largest first
    assert summary.total_ms == pytest.approx(46.0)
    text = device_profile.table(summary, top=2)
    assert "46.0 ms over 2 device(s)" in text and GEMM in text and FUSION not in text


def test_a_folder_without_a_trace_is_an_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="xplane"):
        device_profile.summarise(tmp_path, steps=1)
