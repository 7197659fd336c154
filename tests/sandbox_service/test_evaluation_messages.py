"""Whatever a candidate says on the verdict channel, it is charged to that candidate alone.

Each case is a candidate that, at its first forward, finds the runner's `emit` (which holds the nonce) and
`control` on the stack, as code past the static layer could, and sends what the protocol does not expect:
a malformed output hand-over, a message of the wrong type, shape or moment, a frame the decoder chokes on.
It must end `cheat` naming the rule, never `infra_error` (which trainers mask), never restart the judge,
never change the lane; and on the same lane an honest evaluation stays `ok` and a wrong one `incorrect`.
"""

from __future__ import annotations

import dataclasses

import pytest

from sandbox_cases import CORRECT, FAST, INCORRECT, REFERENCE, forging
from sandbox_service.evaluation import evaluate, run_isolated
from sandbox_service.results import Status

HANDOVER = "malformed-handover"
CHANNEL = "verdict-channel-tampering"

ATTACKS = {
    # -- output hand-overs: files ------------------------------------------------------------------
    "file outside the outputs folder": (HANDOVER, '_outputs(emit, job, {"kind": "file", "path": "/etc/hostname"})'),
    "file reached through ..": (HANDOVER, '''
path = os.path.join(job["outputs_dir"], "..", "outputs", "set_0_trial_0.safetensors")
save_file({"0": torch.zeros(8, 4096)}, _path(job))
_outputs(emit, job, {"kind": "file", "path": path})'''),
    "another trial's file": (HANDOVER, '''
save_file({"0": torch.zeros(8, 4096)}, _path(job, 0, 1))
_outputs(emit, job, {"kind": "file", "path": _path(job, 0, 1)})'''),
    "symlink to a file elsewhere": (HANDOVER, '''
elsewhere = os.path.join(os.path.dirname(job["outputs_dir"]), "elsewhere.safetensors")
save_file({"0": torch.zeros(8, 4096)}, elsewhere)
os.symlink(elsewhere, _path(job))
_outputs(emit, job, {"kind": "file", "path": _path(job)})'''),
    "file that is not safetensors": (HANDOVER, '''
with open(_path(job), "wb") as f:
    f.write(b"\\x10\\x00\\x00\\x00\\x00\\x00\\x00\\x00not a header")
_outputs(emit, job, {"kind": "file", "path": _path(job)})'''),
    "safetensors with other tensor names": (HANDOVER, '''
save_file({"out": torch.zeros(8, 4096)}, _path(job))
_outputs(emit, job, {"kind": "file", "path": _path(job)})'''),
    "file hand-over with extra fields": (HANDOVER, '''
save_file({"0": torch.zeros(8, 4096)}, _path(job))
_outputs(emit, job, {"kind": "file", "path": _path(job), "passed": True})'''),
    "hand-over that is not an object": (HANDOVER, '_outputs(emit, job, ["file", _path(job)])'),
    "unknown hand-over kind": (HANDOVER, '_outputs(emit, job, {"kind": "pickle", "data": "80049500"})'),
    # -- output hand-overs: CUDA IPC (allowed on this lane from 1 kB up, see the test) ----------------
    "IPC handle that is not hex": (HANDOVER, '''
handover = _ipc()
handover["tensors"][0]["meta"][1] = "not hex"
_outputs(emit, job, handover)'''),
    "IPC handle with a field missing": (HANDOVER, '''
handover = _ipc()
handover["tensors"][0]["meta"].pop()
_outputs(emit, job, handover)'''),
    "IPC tensor with a huge shape": (HANDOVER,
                                     '_outputs(emit, job, _ipc(shape=[2**40, 2**40], stride=[2**40, 1]))'),
    "IPC tensor past its storage": (HANDOVER, '_outputs(emit, job, _ipc(offset=1))'),
    "IPC tensor of an unknown dtype": (HANDOVER, '_outputs(emit, job, _ipc(dtype="Tensor"))'),
    "IPC tensor with a negative stride": (HANDOVER, '_outputs(emit, job, _ipc(stride=[-4096, 1]))'),
    "IPC reference counter that is not torch's": (HANDOVER, '''
handover = _ipc()
handover["tensors"][0]["meta"][4] = "/dev/shm/tritonrl-eval".encode().hex()
_outputs(emit, job, handover)'''),
    "IPC hand-over below the IPC threshold": (HANDOVER, '_outputs(emit, job, _ipc(shape=[8], stride=[1]))'),
    # -- trial_outputs fields ------------------------------------------------------------------------
    "input set out of range": (CHANNEL, '_outputs(emit, job, {"kind": "file", "path": _path(job, 99, 0)}, set_index=99)'),
    "trial that is a string": (CHANNEL, '''
save_file({"0": torch.zeros(8, 4096)}, _path(job))
_outputs(emit, job, {"kind": "file", "path": _path(job)}, trial="0")'''),
    "trial that is a boolean": (CHANNEL, '''
save_file({"0": torch.zeros(8, 4096)}, _path(job))
_outputs(emit, job, {"kind": "file", "path": _path(job)}, trial=False)'''),
    "trial_outputs without its hand-over": (CHANNEL, 'emit("trial_outputs", set=0, trial=0, fingerprint=FINGERPRINT)'),
    "trial_outputs out of order": (CHANNEL, '''
save_file({"0": torch.zeros(8, 4096)}, _path(job, 0, 1))
_outputs(emit, job, {"kind": "file", "path": _path(job, 0, 1)}, trial=1)'''),
    # -- other messages --------------------------------------------------------------------------------
    "message of an unknown type": (CHANNEL, 'emit("verdict", trials=[{"passed": True}])'),
    "message of a type the stream reports itself": (CHANNEL, 'emit("exited")'),
    "outputs_done before the trials": (CHANNEL, '''
emit("outputs_done", phases={"setup": 0.0, "compile": 0.0, "trials": 0.0}, launches=2,
     input_fingerprints=[[FINGERPRINT, FINGERPRINT]], output_fingerprints=[[FINGERPRINT, FINGERPRINT]],
     launches_per_forward=[1, 1], side_stream_launches=0, ops={}, violations=[])'''),
    "outputs_done with fields of the wrong type": (CHANNEL, '''
emit("outputs_done", phases=[], launches="many", input_fingerprints=None, output_fingerprints=None,
     launches_per_forward=None, side_stream_launches=None, ops=None, violations=None)'''),
    "build request where no builder is used": (CHANNEL, '''
emit("build_request", name="x", source="int main;", library_dirs=[], include_dirs=[], libraries=[])'''),
    "frame nested too deeply to decode": (CHANNEL, '_raw(b"[" * 200000)'),
    "frame larger than a candidate may send": (CHANNEL, 'emit("runtime_error", phase="x", error="e" * (5 << 20))'),
}
IPC_ATTACKS = {name for name in ATTACKS if "IPC" in name}


def _assert_lane_still_judges(lane) -> None:
    honest = evaluate(REFERENCE, CORRECT, FAST, lane)
    assert honest.status == Status.OK, honest.error
    wrong = evaluate(REFERENCE, INCORRECT, FAST, lane)
    assert wrong.status == Status.INCORRECT, wrong.error


def _restarts(lane) -> int:
    return sum(judge.restarts for judge in lane.judges)


@pytest.mark.parametrize("name", list(ATTACKS))
def test_a_malformed_message_is_the_senders_cheat_and_changes_nothing_else(in_process_lane, monkeypatch, name):
    rule, attack = ATTACKS[name]
    if name in IPC_ATTACKS:
        monkeypatch.setattr(in_process_lane, "ipc_min_bytes", 1024)  # IPC allowed (a CPU tensor still goes by file)
    threshold, restarts = in_process_lane.ipc_min_bytes, _restarts(in_process_lane)
    # A short time limit: before the fix, a frame the decoder choked on left the server waiting for nothing.
    result = run_isolated(REFERENCE, forging(attack), dataclasses.replace(FAST, timeout_s=20), in_process_lane)
    assert result.status == Status.CHEAT, (result.status, result.error)
    assert rule in [v.rule for v in result.violations], result.violations
    assert not result.correct
    assert in_process_lane.ipc_min_bytes == threshold  # the lane's hand-over setting is not the candidate's to change
    assert _restarts(in_process_lane) == restarts  # no message restarts the judge
    _assert_lane_still_judges(in_process_lane)


def test_an_ipc_hand_over_that_cannot_be_mapped_falls_back_to_files_for_that_evaluation_only(in_process_lane, monkeypatch):
    """Well-formed handles that the judge cannot map (here: no CUDA at all) are not a cheat: that trial, and
    every later one of the evaluation, goes by file. The lane keeps its threshold for everyone else."""
    monkeypatch.setattr(in_process_lane, "ipc_min_bytes", 1024)
    attack = '''
_outputs(emit, job, _ipc())
answer = control.receive()
assert answer == {"type": "continue", "resend": "file"}, answer
'''
    restarts = _restarts(in_process_lane)
    result = run_isolated(REFERENCE, forging(attack), FAST, in_process_lane)
    assert result.status == Status.OK, result.error
    assert in_process_lane.ipc_min_bytes == 1024
    assert _restarts(in_process_lane) == restarts
    _assert_lane_still_judges(in_process_lane)
