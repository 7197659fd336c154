"""The judge, driven directly: it prepares a task from the source in its request, and no request, however
malformed its candidate-derived hand-over, raises or ends it; what the candidate got wrong is answered
`malformed` (the evaluation's cheat), never an error the lane would blame on itself."""

from __future__ import annotations

import os

import pytest
import torch
from safetensors.torch import save_file

from sandbox_cases import REFERENCE
from sandbox_service.worker import harness, judge

KEY = "test-task"


def _prepare_request(source: str = REFERENCE, key: str = KEY) -> dict:
    return {"op": "prepare", "key": key, "reference_source": source, "input_sets": [], "seed": 42, "trials": 2,
            "tolerances": {}, "degenerate_rel_l2": 0.02}


@pytest.fixture()
def prepared(tmp_path):
    """A judge with the example task prepared, and this evaluation's (resolved) outputs folder."""
    the_judge = judge.Judge("interpreter")
    answer = judge.answer(the_judge, _prepare_request())
    assert answer["type"] == "prepared", answer
    outputs = tmp_path / "outputs"
    outputs.mkdir()
    return the_judge, os.path.realpath(outputs)


def _expected(the_judge: judge.Judge, trial: int = 0) -> list[torch.Tensor]:
    return the_judge.problems[KEY].expected[(0, trial)]


def _compare(the_judge, outputs_dir, handover, set_index=0, trial=0, ipc_min_bytes=None) -> dict:
    return judge.answer(the_judge, {"op": "compare", "key": KEY, "set": set_index, "trial": trial,
                                    "handover": handover, "outputs_dir": outputs_dir,
                                    "ipc_min_bytes": ipc_min_bytes})


def _file(outputs_dir: str, set_index: int = 0, trial: int = 0) -> dict:
    return {"kind": "file", "path": os.path.join(outputs_dir, f"set_{set_index}_trial_{trial}.safetensors")}


def test_prepare_takes_the_reference_source_from_the_request_and_caches_by_key(tmp_path):
    the_judge = judge.Judge("interpreter")
    first = judge.answer(the_judge, _prepare_request())
    assert first["type"] == "prepared", first
    assert len(first["input_fingerprints"][0]) == 2
    again = judge.answer(the_judge, _prepare_request())
    assert again["input_fingerprints"] == first["input_fingerprints"]
    assert the_judge.counts["prepare_miss"] == 1 and the_judge.counts["prepare_hit"] == 1


def test_input_sets_come_with_the_source():
    request = {**_prepare_request(key="with-a-set"), "input_sets": [
        {"name": "wide", "source": "def get_inputs():\n    return [torch.randn(2, N), torch.randn(2, N)]\n"}]}
    answer = judge.answer(judge.Judge("interpreter"), request)
    assert answer["type"] == "prepared", answer
    assert answer["set_names"] == ["default", "wide"] and len(answer["input_fingerprints"]) == 2


def test_a_source_that_reads_its_own_lines_finds_them():
    """No file behind the reference: its lines are still there for inspect (TorchScript, say)."""
    source = REFERENCE + "\nimport inspect\nassert 'alpha * a' in inspect.getsource(Model.forward)\n"
    answer = judge.answer(judge.Judge("interpreter"), _prepare_request(source, key="reads-itself"))
    assert answer["type"] == "prepared", answer


def test_honest_file_outputs_are_compared(prepared):
    the_judge, outputs = prepared
    harness.save_outputs(_expected(the_judge), _file(outputs)["path"])
    answer = _compare(the_judge, outputs, _file(outputs))
    assert answer["type"] == "compared" and answer["passed"], answer


def test_a_trim_gives_back_the_kept_expected_outputs_and_the_task_is_still_judged(prepared):
    # While an evaluation waits for GPU memory the lane asks its judges for what they keep (Lane.relieve_memory).
    the_judge, outputs = prepared
    expected = [t.clone() for t in _expected(the_judge)]
    kept = the_judge.problems[KEY].cached_bytes
    assert kept > 0
    answer = judge.answer(the_judge, {"op": "trim"})
    assert answer == {"type": "trimmed", "expected_bytes": kept}
    assert the_judge.problems[KEY].expected == {} and the_judge.problems[KEY].cached_bytes == 0
    harness.save_outputs(expected, _file(outputs)["path"])
    answer = _compare(the_judge, outputs, _file(outputs))
    assert answer["type"] == "compared" and answer["passed"], answer
    assert the_judge.counts["recompute"] == 1 and the_judge.counts["trims"] == 1
    harness.save_outputs([t + 1 for t in expected], _file(outputs, trial=1)["path"])
    answer = _compare(the_judge, outputs, _file(outputs, trial=1), trial=1)
    assert answer["type"] == "compared" and not answer["passed"], answer


def _symlink_elsewhere(the_judge, outputs):
    elsewhere = os.path.join(os.path.dirname(outputs), "elsewhere.safetensors")
    harness.save_outputs(_expected(the_judge), elsewhere)
    os.symlink(elsewhere, _file(outputs)["path"])
    return _file(outputs)


def _folder_swapped_for_a_symlink(the_judge, outputs):
    real = os.path.join(os.path.dirname(outputs), "real-outputs")
    os.rename(outputs, real)
    os.symlink(real, outputs)
    harness.save_outputs(_expected(the_judge), os.path.join(real, "set_0_trial_0.safetensors"))
    return _file(outputs)


def _not_safetensors(the_judge, outputs):
    with open(_file(outputs)["path"], "wb") as f:
        f.write(b"\xff" * 64)
    return _file(outputs)


def _other_names(the_judge, outputs):
    save_file({"result": _expected(the_judge)[0].contiguous()}, _file(outputs)["path"])
    return _file(outputs)


def _a_fifo(the_judge, outputs):
    os.mkfifo(_file(outputs)["path"])
    return _file(outputs)


def _outside(the_judge, outputs):
    harness.save_outputs(_expected(the_judge), "/tmp/tritonrl-test-outside.safetensors")
    return {"kind": "file", "path": "/tmp/tritonrl-test-outside.safetensors"}


MALFORMED = {
    "a path outside the outputs folder": _outside,
    "a path through ..": lambda j, o: {"kind": "file", "path": os.path.join(o, "..", os.path.basename(o),
                                                                              "set_0_trial_0.safetensors")},
    "a symlink to a file elsewhere": _symlink_elsewhere,
    "the outputs folder swapped for a symlink": _folder_swapped_for_a_symlink,
    "a file that is not safetensors": _not_safetensors,
    "safetensors with other tensor names": _other_names,
    "a fifo": _a_fifo,
    "a missing file": lambda j, o: _file(o),
    "a path that is not a string": lambda j, o: {"kind": "file", "path": 7},
    "a hand-over that is a list": lambda j, o: ["file", _file(o)["path"]],
    "a hand-over without a kind": lambda j, o: {"path": _file(o)["path"]},
    "an IPC hand-over where only files are allowed": lambda j, o: {"kind": "ipc", "tensors": []},
}


@pytest.mark.parametrize("name", list(MALFORMED))
def test_a_malformed_file_hand_over_is_answered_malformed(prepared, name):
    the_judge, outputs = prepared
    answer = _compare(the_judge, outputs, MALFORMED[name](the_judge, outputs))
    assert answer["type"] == "malformed" and answer["rule"] == "malformed-handover", answer


def _ipc(**changes) -> dict:
    item = {"meta": [0, "ab" * 64, 8 * 4096 * 4, 0, "/torch_1_2_3".encode().hex(), 0, "cd" * 64, False],
            "dtype": "float32", "shape": [8, 4096], "stride": [4096, 1], "offset": 0}
    item.update(changes)
    return {"kind": "ipc", "tensors": [item]}


@pytest.mark.parametrize("handover", [
    _ipc(shape=[2**40, 2**40], stride=[2**40, 1]),
    _ipc(shape=[8, 4096], stride=[4096, 1], offset=2**60),
    _ipc(dtype="not_a_dtype"),
    _ipc(dtype="Tensor"),
    _ipc(shape="8x4096"),
    _ipc(meta=[0, "zz", 1, 0, "00", 0, "00", False]),
    _ipc(meta=[0, "ab"]),
    {"kind": "ipc", "tensors": [{"meta": None}]},
    {"kind": "ipc", "tensors": "all of them"},
], ids=["huge shape", "huge offset", "unknown dtype", "a torch name that is no dtype", "shape as text",
        "handle not hex", "handle too short", "no handle", "tensors not a list"])
def test_a_malformed_ipc_hand_over_is_answered_malformed(prepared, handover):
    the_judge, outputs = prepared
    answer = _compare(the_judge, outputs, handover, ipc_min_bytes=1024)
    assert answer["type"] == "malformed", answer


def test_well_formed_ipc_handles_that_cannot_be_mapped_are_answered_ipc_failed(prepared):
    the_judge, outputs = prepared
    answer = _compare(the_judge, outputs, _ipc(), ipc_min_bytes=1024)
    assert answer["type"] == "ipc_failed", answer


@pytest.mark.parametrize("position", [(99, 0), (0, 99), (-1, 0), ("0", 0), (0, None), (True, 0)])
def test_a_trial_the_task_does_not_have_is_answered_malformed(prepared, position):
    the_judge, outputs = prepared
    answer = _compare(the_judge, outputs, _file(outputs), *position)
    assert answer["type"] == "malformed", answer


@pytest.mark.parametrize("request_", [
    {"op": "compare"},
    {"op": "compare", "key": KEY},
    {"op": "prepare", "key": "no-source", "input_sets": [], "seed": 1, "trials": 1, "tolerances": {},
     "degenerate_rel_l2": 0.02},
    {"op": "prepare", "key": "path-instead", "reference_path": "/etc/passwd", "input_sets": [], "seed": 1,
     "trials": 1, "tolerances": {}, "degenerate_rel_l2": 0.02},
    {"op": "time", "key": KEY},
    {"op": "launch the missiles"},
], ids=["compare without fields", "compare without a hand-over", "prepare without a source",
        "prepare with a path", "time without a method", "unknown op"])
def test_a_malformed_request_is_answered_and_the_judge_goes_on(prepared, request_):
    the_judge, outputs = prepared
    answer = judge.answer(the_judge, request_)
    assert answer["type"] == "error" and answer["kind"] == "protocol", answer
    harness.save_outputs(_expected(the_judge), _file(outputs)["path"])
    assert _compare(the_judge, outputs, _file(outputs))["passed"]  # still serving the task


def test_an_outputs_file_far_larger_than_the_reference_s_is_not_read(prepared, monkeypatch):
    the_judge, outputs = prepared
    monkeypatch.setattr(judge, "FILE_SLACK_BYTES", 0)
    save_file({"0": torch.zeros(8 * 4096 * 9)}, _file(outputs)["path"])  # 9 times the reference's outputs
    answer = _compare(the_judge, outputs, _file(outputs))
    assert answer["type"] == "compared" and not answer["passed"], answer
    assert "bytes" in answer["message"]


def _reference_outputs(the_judge: judge.Judge, seed: int) -> list[torch.Tensor]:
    problem = the_judge.problems[KEY]
    inputs = harness.trial_inputs(problem.sets[0][1], seed, the_judge.device)
    return [t.detach() for t in harness.flatten_outputs(problem.models[0](*inputs))]


def test_a_timing_check_is_compared_against_the_reference_on_its_own_seed(prepared):
    """A timing check comes as a trial after the prepared ones with the seed the server drew for it: the judge
    runs the reference on that seed then (nothing prepared or cached repeats between evaluations)."""
    the_judge, outputs = prepared
    harness.save_outputs(_reference_outputs(the_judge, 777), _file(outputs, trial=2)["path"])
    request = {"op": "compare", "key": KEY, "set": 0, "trial": 2, "handover": _file(outputs, trial=2),
               "outputs_dir": outputs, "ipc_min_bytes": None}
    assert judge.answer(the_judge, {**request, "seed": 777})["passed"]
    assert not judge.answer(the_judge, {**request, "seed": 778})["passed"]
    assert judge.answer(the_judge, request)["type"] == "malformed"  # without a seed: a trial the task lacks
    assert judge.answer(the_judge, {**request, "seed": -1})["type"] == "malformed"
    assert the_judge.counts["fresh_seed"] == 2


def test_a_timing_check_s_sample_is_compared_with_the_elements_its_seed_names(prepared):
    """After every timed run the executor copies a sample of the outputs (harness.sample_indices, from a seed
    new to the run): the judge compares the reference's elements that the same seed names, and nothing else."""
    the_judge, outputs = prepared
    full = [t.reshape(-1) for t in _reference_outputs(the_judge, 777)]
    assert full[0].numel() > harness.TIMING_SAMPLE  # a sample, not the whole output
    sample = [t[i] for t, i in zip(full, harness.sample_indices([t.numel() for t in full], 55))]
    harness.save_outputs(sample, _file(outputs, trial=2)["path"])
    request = {"op": "compare", "key": KEY, "set": 0, "trial": 2, "handover": _file(outputs, trial=2),
               "outputs_dir": outputs, "ipc_min_bytes": None, "seed": 777}
    assert judge.answer(the_judge, {**request, "sample_seed": 55})["passed"]
    assert not judge.answer(the_judge, {**request, "sample_seed": 56})["passed"]  # other elements
    assert not judge.answer(the_judge, request)["passed"]  # a sample is not the whole output
    without_seed = {k: v for k, v in request.items() if k != "seed"}
    assert judge.answer(the_judge, {**without_seed, "sample_seed": 55})["type"] == "malformed"


def test_a_sample_is_the_same_for_a_seed_and_new_for_another():
    first, again, other = (harness.sample_indices([100_000, 10], seed) for seed in (1, 1, 2))
    assert all(torch.equal(a, b) for a, b in zip(first, again))
    assert not torch.equal(first[0], other[0])
    assert first[0].numel() == harness.TIMING_SAMPLE and torch.equal(first[1], torch.arange(10))


def test_the_reference_is_timed_on_fresh_inputs_when_the_candidate_is(prepared, monkeypatch):
    """The executor times a candidate on new inputs for every run; the reference's time it is compared with is
    taken the same way (the same inputs every run made the reference look faster), and cached apart."""
    from sandbox_service import timing

    the_judge, _ = prepared
    model = the_judge.problems[KEY].models[0]
    seen: list[float] = []
    monkeypatch.setattr(model, "forward", lambda *inputs: seen.append(float(inputs[0].sum())) or inputs[0])

    def time_on_the_cpu(fn, *, warmup, runs, method, before_run=None, lead_us=None):
        for i in range(runs):
            before_run(i)
            fn()
        return timing.summarize([1.0] * runs, method)

    monkeypatch.setattr(timing, "time_cuda", time_on_the_cpu)
    request = {"op": "time", "key": KEY, "method": timing.CUDA_EVENTS, "warmup": 0, "runs": 5}
    assert judge.answer(the_judge, {**request, "fresh_inputs": True})["type"] == "timed"
    assert len(set(seen)) == 5
    seen.clear()
    assert judge.answer(the_judge, request)["type"] == "timed"
    assert len(set(seen)) == 1
    assert the_judge.counts["time_miss"] == 2
    # cached, unless the server asks for the reference to be measured once more
    seen.clear()
    assert judge.answer(the_judge, request)["type"] == "timed" and not seen
    assert judge.answer(the_judge, {**request, "remeasure": True})["type"] == "timed" and len(seen) == 5
    assert the_judge.counts["time_miss"] == 3
