"""The schema of a candidate's messages: what an honest candidate runner sends passes, anything else names
the rule it broke."""

from __future__ import annotations

import os

import pytest

from sandbox_service.worker import messages

FP = "0" * 64


@pytest.fixture()
def schema(tmp_path):
    outputs = tmp_path / "outputs"
    outputs.mkdir()
    (outputs / "set_1_trial_0.safetensors").write_bytes(b"")
    return messages.Schema(sets=2, trials=3, outputs_dir=os.path.realpath(outputs), ipc_min_bytes=1024)


def _honest(schema) -> dict[str, dict]:
    grid = [[FP] * 3, [FP] * 3]
    return {
        "inputs_ready": {"fingerprints": grid},
        "build_request": {"name": "__triton_launcher", "source": "int x;", "library_dirs": ["/usr/lib"],
                          "include_dirs": [], "libraries": ["cuda"]},
        "trial_outputs": {"set": 1, "trial": 0, "fingerprint": FP,
                          "handover": {"kind": "file",
                                       "path": os.path.join(schema.outputs_dir, "set_1_trial_0.safetensors")}},
        "outputs_done": {"phases": {"setup": 0.1, "compile": 1, "trials": 0.5}, "launches": 6,
                         "input_fingerprints": grid, "output_fingerprints": grid, "launches_per_forward": [1] * 6,
                         "side_stream_launches": 0, "ops": {"aten::add": 3},
                         "violations": [{"layer": "runtime", "rule": "r", "message": "m", "line": None}]},
        "timing": {"candidate": {"median_us": 1.0, "mean_us": 1.0, "std_us": 0.0, "min_us": 1.0, "max_us": 1.0,
                                 "runs": 100, "method": "cuda_events"}, "violations": []},
        "compile_error": {"phase": "import", "error": "SyntaxError"},
        "runtime_error": {"phase": "default trial 0", "error": "boom"},
        "internal_error": {"error": "Traceback"},
        "out_of_memory": {"error": "CUDA out of memory. Tried to allocate 2.00 GiB", "held": 1 << 30,
                          "requested": 2 << 30},
    }


def _message(kind: str, fields: dict) -> dict:
    return {**fields, "type": kind, "nonce": "n"}


def test_what_the_runner_sends_passes(schema):
    for kind, fields in _honest(schema).items():
        assert schema.check(_message(kind, fields))["type"] == kind


def test_an_ipc_hand_over_like_the_runner_s_passes(schema):
    item = {"meta": [0, "ab" * 64, 4096, 0, "/torch_123_456_0".encode().hex(), 0, "cd" * 64, True],
            "dtype": "float32", "shape": [16, 64], "stride": [64, 1], "offset": 0}
    handover = {"kind": "ipc", "tensors": [item]}
    assert messages.check_handover(handover, outputs_dir="/x", set_index=0, trial=0, ipc_min_bytes=1024) is handover


BROKEN = [
    ("unknown type", "verdict", None, messages.CHANNEL_RULE),
    ("missing field", "inputs_ready", {}, messages.CHANNEL_RULE),
    ("extra field", "internal_error", {"error": "x", "passed": True}, messages.CHANNEL_RULE),
    ("fingerprints of another grid", "inputs_ready", {"fingerprints": [[FP] * 3]}, messages.CHANNEL_RULE),
    ("a number as text", "trial_outputs", {"set": "1"}, messages.CHANNEL_RULE),
    ("a boolean as a number", "trial_outputs", {"trial": True}, messages.CHANNEL_RULE),
    ("set out of range", "trial_outputs", {"set": 2}, messages.CHANNEL_RULE),
    ("negative trial", "trial_outputs", {"trial": -1}, messages.CHANNEL_RULE),
    ("another trial's file", "trial_outputs", {"trial": 1}, messages.HANDOVER_RULE),
    ("file outside", "trial_outputs", {"handover": {"kind": "file", "path": "/etc/passwd"}}, messages.HANDOVER_RULE),
    ("path with //", "trial_outputs", {"handover": {"kind": "file", "path": "//x"}}, messages.HANDOVER_RULE),
    ("launches as text", "outputs_done", {"launches": "6"}, messages.CHANNEL_RULE),
    ("a NaN phase", "outputs_done", {"phases": {"setup": float("nan"), "compile": 0, "trials": 0}},
     messages.CHANNEL_RULE),
    ("a violation with extra keys", "outputs_done",
     {"violations": [{"layer": "a", "rule": "b", "message": "c", "__class__": "x"}]}, messages.CHANNEL_RULE),
    ("a negative time", "timing", {"candidate": {"median_us": -1.0, "mean_us": 1.0, "std_us": 0.0, "min_us": 1.0,
                                                 "max_us": 1.0, "runs": 100}}, messages.CHANNEL_RULE),
    ("a build name that is a path", "build_request", {"name": "../x"}, messages.CHANNEL_RULE),
    ("a build source too large", "build_request", {"source": "x" * (messages.MAX_BUILD_SOURCE + 1)},
     messages.CHANNEL_RULE),
    ("an error that is not text", "runtime_error", {"error": {"status": "ok"}}, messages.CHANNEL_RULE),
    ("memory held below zero", "out_of_memory", {"held": -1}, messages.CHANNEL_RULE),
    ("nothing refused", "out_of_memory", {"requested": 0}, messages.CHANNEL_RULE),
]


def test_an_out_of_memory_that_does_not_say_what_was_refused_passes(schema):
    assert schema.check(_message("out_of_memory", {"error": "CUDA error: out of memory", "held": 0}))


@pytest.mark.parametrize("name, kind, change, rule", BROKEN, ids=[b[0] for b in BROKEN])
def test_a_broken_message_names_its_rule(schema, name, kind, change, rule):
    honest = _honest(schema)
    fields = {} if change is None else ({} if change == {} else {**honest[kind], **change})
    with pytest.raises(messages.Malformed) as caught:
        schema.check(_message(kind, fields))
    assert caught.value.rule == rule, caught.value.error


def test_every_dtype_of_a_number_is_known_with_its_size():
    """An honest IPC hand-over names its outputs' dtypes: none of a plain number type may be refused."""
    import torch

    from sandbox_service.correctness import dtype_name

    for dtype in {getattr(torch, name) for name in dir(torch) if isinstance(getattr(torch, name), torch.dtype)}:
        plain = dtype.is_floating_point or dtype.is_complex or dtype in (
            torch.bool, torch.int8, torch.int16, torch.int32, torch.int64, torch.uint8, torch.uint16, torch.uint32,
            torch.uint64)
        if plain:
            assert messages.ELEMENT_BYTES.get(dtype_name(dtype)) == torch.empty(0, dtype=dtype).element_size(), dtype


def test_a_file_hand_over_through_a_symlink_is_malformed(schema, tmp_path):
    target = tmp_path / "elsewhere"
    target.write_bytes(b"")
    link = os.path.join(schema.outputs_dir, "set_0_trial_2.safetensors")
    os.symlink(target, link)
    with pytest.raises(messages.Malformed, match="symlink"):
        messages.check_handover({"kind": "file", "path": link}, outputs_dir=schema.outputs_dir, set_index=0,
                                trial=2, ipc_min_bytes=None)
