"""Red team 10: GPU memory shared with other processes (9c5ff51..74bfb84: `FreeMemory`, `_admitted`, the executor's
`out_of_memory` report, `evaluation.out_of_memory_is_load` and `_execute`'s retry loop) and the keyed per-index
seeds (9efeb42). Each test asserts the secure behaviour, so each FAILS while its flaw is there.

On the CPU lane, as tests/sandbox_service/test_memory_waits.py does it: the lane reads a stand-in of the device's
memory (80 GB, all of it free) and its tasks' estimate ("share") is 16 GB, as `lane.estimate_bytes` says on a GPU.
The executor's code is the real one (runner.run, report_out_of_memory), only the interpreter runs the kernels.

The candidate owns its tracer process, so it writes its launch program itself (as
candidates/writes_its_own_program.py does); here it wraps `tracer.trace` and adds steps to the program an honest
trace made. `check_program` lets every step below through: a plain string may stand anywhere a value may, and a
tensor ref anywhere in an operator's arguments.

- FINDING forged-oom-text: `harness.out_of_memory` is a text match ("out of memory" in a RuntimeError's message) and
  `harness.refused_bytes` reads "Tried to allocate N" from the same text, and both run on every exception the
  replay raises. An operator's error message that echoes a program string is the candidate's text: the step
  `aten.empty.memory_format([1], device="CUDA out of memory. Tried to allocate 1 bytes")` (glue, so strict policy
  allows it) raises `RuntimeError: Invalid device string: 'CUDA out of memory. Tried to allocate 1 bytes'` in the
  executor's replay. The executor reports `out_of_memory` (held: its allocator's peak; requested: 1 byte), which
  `out_of_memory_is_load` finds within the share: load. The evaluation restarts on a fresh executor, fails the
  same way every time, and after 5 tries ends `infra_error` (neutral: the trainer masks it). Any candidate,
  wrong or right, can have its verdict masked, and each try gets a new executor (the pool kills and restarts one
  per try) and a full time limit of its own (the kernels may spin until just before the limit first): one
  evaluation holds its lane slot and the budget 5 times its limit plus the waits. The same on a GPU: the device
  string is refused before any allocation, and held + 1 byte is within any task's share.
  Fix: tell an out-of-memory by what raised it, never by a message: torch's allocator's `torch.OutOfMemoryError`
  (its message composed by torch alone) or a CUDA error whose code is cudaErrorMemoryAllocation (torch's
  AcceleratorError's error code, or the driver's CUresult where Triton's launcher returns it), and read the refused
  size only from the former; every other exception stays the candidate's runtime_error. (Refusing plain strings
  where the schema wants a device or dtype closes this one route only.)

- FINDING oom-redraw: a load out-of-memory throws the attempt away (its trials, those already compared and failed
  included) and starts over on NEW trial seeds, and after 5 tries ends `infra_error`. So a kernel that can trigger
  a load out-of-memory when it sees inputs it would get wrong gets up to 5 draws of inputs, and `infra_error`
  instead of `incorrect` when no draw is lucky: it is never `incorrect`. Shown under the relaxed policy, where
  `aten._assert_async.msg(flag, "CUDA out of memory. Tried to allocate 1 bytes")` raises that text on the CPU only
  when the flag (the kernel's own "I got this one right") is false. On a GPU under strict (torch's CUDA
  `_assert_async` ignores its message) the trigger is a data-dependent allocation (next finding) refused within
  the share: it needs the device short, which the candidate can arrange with memory its own context holds outside
  torch's allocator (the local memory the driver reserves for a kernel that spills, kept for the context's life
  and not in `max_memory_reserved`, so also not in `held`), or a sibling evaluation of the same group holding more
  than its share (the executor's allocations are not capped). The same trigger during the timed batch (a kernel
  that sees, from the longer gap, that a run it skipped was checked) redraws the timing checks as well.
  Fix: a retry must not be a new draw: keep the trial seeds of the first try for every try (a fresh executor
  keeps nothing of the last one's), keep the verdict of every trial already compared (a failed one ends
  `incorrect`), and only let an out-of-memory the candidate cannot cause count as load (previous finding; cap the
  executor at its share: `torch.cuda.set_per_process_memory_fraction` per job, and count what the executor's
  process holds on the device through NVML's per-process figure, not torch's allocator, so that memory outside
  the allocator is the candidate's).

- FINDING host-read-through-int-arguments: NEVER keeps `item`/`_local_scalar_dense` ("values to the host") out of
  the replay, but an operator takes a 0-dim tensor where its schema wants an int (SymInt[] sizes, for one) and
  torch's argument parser reads its value to the host. A program that hands a kernel-written tensor to
  `aten.empty.memory_format` as its size makes the executor allocate what the kernel decides, trial by trial, under
  the strict policy: the data-dependent allocation of the previous finding (and a sync the kernel controls).
  Fix: check_program must allow a tensor ref only where the operator's schema takes a Tensor (or a list of
  Tensors), from `op._schema`, and refuse it anywhere else as `malformed-program` (the honest tracer records the
  ints, never a tensor, there); or the replay raises Unsupported on it.

- FINDING executor-memory-uncapped (GPU only; the test is marked gpu and was NOT run: no device time was left): the
  share is used to judge an out-of-memory after the fact, but nothing holds an executor to it. A program that
  allocates far beyond its task's share (a glue `torch.empty` of most of the GPU, allowed under strict, no size
  bound) is charged only if that allocation is refused; when it succeeds the candidate is `ok`, while every other
  evaluation on the GPU is refused memory within its own share (load: retried on new seeds, `infra_error` after 5)
  or waits at admission for memory the hog holds (`infra_error` after FREE_MEMORY_WAIT_S, 600 s). With
  forged-oom-text the hog is held through 5 tries of the attacker's own (5 time limits: 637 s at a 120 s limit,
  beyond the victims' 600 s wait). Memory the executor's context holds outside torch's allocator is invisible to
  `held` and survives the job in a reused executor (the local memory the driver keeps after a spilling kernel;
  `forget_job` only empties torch's cache): an idle executor holding it makes every later admission on the GPU wait
  for memory that no running evaluation will give back. Fix: cap each job's allocator at its share
  (`torch.cuda.set_per_process_memory_fraction(share / total)` before the job, so a hog is refused in its own
  executor and charged there), and after each job read the executor's own use through NVML's per-process figure
  (nvmlDeviceGetComputeRunningProcesses, the server's trusted reading): an executor holding more than a context
  between jobs is discarded, not reused, and what it held beyond torch's figure counts toward `held`.

Attacks that failed (no test): see the report of red team 10 (docs/security.md once recorded).
"""

from __future__ import annotations

import dataclasses

import pytest

import sandbox_service.evaluation as evaluation
from attack_support import FAST, RELU, dedicated_lane, describe
from sandbox_service.devices import DeviceMemory
from sandbox_service.evaluation import run_isolated
from sandbox_service.lane import EXECUTOR_DESIGN
from sandbox_service.options import Policy
from sandbox_service.results import Status
from sandbox_service.worker.pool import FreeMemory

GB = 10**9
# P(N(0,1) > 2.5) = 0.0062: with 2 trials an attempt is right about once in 26,000, so once the flaw is fixed the
# kernel of the redraw test is `ok` by luck that rarely (with 0.0 instead, a quarter of the attempts; measured on
# 8d67fc4 with 0.0: 9 of 12 evaluations ok and 3 infra_error with the trigger, 2 ok and 10 incorrect without).
LUCKY = 2.5
TOTAL = 80 * GB
SHARE = 16 * GB


@pytest.fixture(scope="module")
def lane():
    with dedicated_lane(design=EXECUTOR_DESIGN) as lane:
        yield lane


@pytest.fixture
def gpu_like(lane, monkeypatch):
    """The lane as a GPU lane sees memory: a device of 80 GB with all of it free (no other process holds any, so
    no out-of-memory here is load), tasks' share 16 GB, 5 tries a short pause apart."""
    free_memory = FreeMemory(lambda: DeviceMemory(TOTAL, TOTAL), margin=1 * GB, wait_s=30.0)
    free_memory.poll_s = 0.05
    monkeypatch.setattr(lane, "free_memory", free_memory)
    monkeypatch.setattr(lane, "estimate_bytes", lambda input_bytes, output_bytes: SHARE)
    monkeypatch.setattr(evaluation, "MEMORY_WAITS_S", (0.05, 0.05, 0.05, 0.05))
    return lane


# The candidate: ModelNew runs a ReLU kernel (with SOMETIMES: right only when the input's first element, a standard
# normal draw, is above LUCKY); at import it wraps the tracer's `trace` so that the program it writes has EXTRA steps
# appended to every input set (placeholders: {input} the forward's input ref, {output} the returned ref, {scratch} a
# 0-dim int64 tensor the kernel wrote, and free refs from 60000 up).
_CANDIDATE = '''
import json
import sys

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def relu_1d(src, dst, flag, n, BLOCK: tl.constexpr, SOMETIMES: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    v = tl.load(src + i, mask=i < n, other=0.0)
    first = tl.load(src)
    if SOMETIMES:
        out = tl.where(first > __LUCKY__, tl.where(v > 0, v, tl.zeros_like(v)), v)  # wrong unless first > LUCKY
    else:
        out = tl.where(v > 0, v, tl.zeros_like(v))
    tl.store(dst + i, out, mask=i < n)
    tl.store(flag, (first > __LUCKY__).to(tl.int64) + 1)  # 2 when the kernel knows it got this trial right, else 1


class ModelNew(nn.Module):
    def forward(self, x):
        flat = x.flatten()
        n = flat.shape[0]
        out = torch.empty(n, dtype=x.dtype, device=x.device)
        flag = torch.empty((), dtype=torch.int64, device=x.device)
        relu_1d[((n + 127) // 128,)](flat, out, flag, n, BLOCK=128, SOMETIMES=__SOMETIMES__)
        return out.reshape(x.shape)


_EXTRA = json.loads(__EXTRA__)
_tracer = sys.modules["sandbox_service.untrusted.tracer"]
_trace = _tracer.trace


def _forged_trace(*args, **kwargs):
    program, constants = _trace(*args, **kwargs)
    for program_set in program["sets"]:
        launch = next(step for step in program_set["steps"] if "launch" in step)
        refs = {"input": program_set["inputs"][0]["tensor"]["ref"], "output": program_set["outputs"][0]["ref"],
                "scratch": launch["args"][2]["ref"]}
        text = json.dumps(_EXTRA)
        for name, ref in refs.items():
            text = text.replace('"{%s}"' % name, str(ref))
        program_set["steps"] += json.loads(text)
    print("attempted-forged-program", flush=True)
    return program, constants


_tracer.trace = _forged_trace
'''


def _candidate(extra: list, sometimes: bool = False, lucky: float = LUCKY) -> str:
    import json

    return _CANDIDATE.replace("__EXTRA__", repr(json.dumps(extra))).replace("__SOMETIMES__", str(sometimes)).replace(
        "__LUCKY__", repr(lucky))


_OOM_TEXT = "CUDA out of memory. Tried to allocate 1 bytes"


# FINDING forged-oom-text
def test_a_program_string_that_reads_like_an_out_of_memory_is_not_load(gpu_like):
    """An operator's error that echoes a string of the candidate's program ("Invalid device string: 'CUDA out of
    memory. Tried to allocate 1 bytes'") is read as the executor running out of GPU memory within the task's share
    (held 0 + 1 byte <= 16 GB: load) on a device that has every byte free: 5 tries on fresh executors, then
    `infra_error`, which the trainer masks. It must be the candidate's own failure (runtime_error, or cheat for a
    program no honest tracer writes)."""
    extra = [{"op": "aten.empty.memory_format", "args": [[1]], "kwargs": {"device": _OOM_TEXT}, "out": {"ref": 60000}}]
    result = run_isolated(RELU, _candidate(extra), FAST, gpu_like)
    assert "attempted-forged-program" in result.stdout_tail or result.status == Status.INFRA_ERROR, describe(result)
    assert result.status in (Status.RUNTIME_ERROR, Status.CHEAT), (
        f"a candidate's own error text made its verdict {describe(result)}")


# FINDING oom-redraw
def test_a_kernel_that_signals_load_when_it_would_be_wrong_gets_no_new_draw(gpu_like):
    """A ReLU kernel that is right only when the input's first element is above LUCKY, and knows when it is: after
    it, `_assert_async.msg(first > LUCKY, "CUDA out of memory. Tried to allocate 1 bytes")` raises only on the inputs
    it gets wrong (relaxed policy; no operator is heavy). Each raise is load: the attempt is thrown away and the next
    one runs on new seeds; the evaluation ends `ok` when one of 5 draws is lucky, else `infra_error`: never
    `incorrect` (with LUCKY 0.0, 76% ok). It must end as the wrong kernel it is (incorrect, or runtime_error for
    the raise)."""
    extra = [
        {"op": "aten.select.int", "args": [{"ref": "{input}"}, 0, 0], "kwargs": {}, "out": {"ref": 60001}},
        {"op": "aten.select.int", "args": [{"ref": 60001}, 0, 0], "kwargs": {}, "out": {"ref": 60002}},
        {"op": "aten.gt.Scalar", "args": [{"ref": 60002}, LUCKY], "kwargs": {}, "out": {"ref": 60003}},
        {"op": "aten._assert_async.msg", "args": [{"ref": 60003}, _OOM_TEXT], "kwargs": {}, "out": None},
    ]
    options = dataclasses.replace(FAST, policy=Policy.RELAXED)
    result = run_isolated(RELU, _candidate(extra, sometimes=True), options, gpu_like)
    assert "attempted-forged-program" in result.stdout_tail or result.status in (Status.OK, Status.INFRA_ERROR), \
        describe(result)
    assert result.status in (Status.INCORRECT, Status.RUNTIME_ERROR), (
        f"a kernel wrong on nearly all its inputs, which asks for a retry when it is, got {describe(result)}")


# FINDING host-read-through-int-arguments
def test_the_replay_reads_no_tensor_value_to_the_host(gpu_like):
    """Strict policy. The kernel writes 1 or 2 into a 0-dim int64 tensor (2 when the input's first element is
    above LUCKY); the program hands that tensor to `aten.empty.memory_format` as its size, so the executor allocates a
    scratch of a size the kernel chose from the data (here 1 or 2 elements; on a GPU as much as the kernel likes,
    trial by trial). NEVER keeps `item` and `_local_scalar_dense` out; this is the same read. The evaluation must
    not be `ok`: the program reads a value back to the host (unsupported), or is malformed (a tensor where the
    schema takes an int)."""
    extra = [{"op": "aten.empty.memory_format", "args": [[{"ref": "{scratch}"}]], "kwargs": {}, "out": {"ref": 60004}}]
    result = run_isolated(RELU, _candidate(extra), FAST, gpu_like)
    assert "attempted-forged-program" in result.stdout_tail or result.status == Status.OK, describe(result)
    assert result.status != Status.OK, f"a size read from a tensor's value on the host: {describe(result)}"


# FINDING executor-memory-uncapped
@pytest.mark.gpu
def test_an_executor_that_holds_far_beyond_its_share_is_not_ok(gpu_lane):
    """On a GPU lane (not run by red team 10: no device time left). The ReLU task's share is about 0.64 GB (a
    context and 5 x 16 KB of inputs, 3 x 16 KB of outputs); the candidate's forward also allocates an 8 GB scratch
    (`torch.empty`, glue under strict) and computes the right answer. The allocation succeeds on an idle H100, so
    8d67fc4 answers `ok` while, beside other evaluations, those are the ones refused memory or kept waiting. Memory
    beyond the task's share is the candidate's: it must not be ok (refused in its own executor: runtime_error)."""
    source = _candidate([]).replace(
        "        flag = torch.empty((), dtype=torch.int64, device=x.device)\n",
        "        flag = torch.empty((), dtype=torch.int64, device=x.device)\n"
        "        scratch = torch.empty(2 * 10**9, dtype=torch.float32, device=x.device)\n")
    assert "scratch" in source
    share = gpu_lane.estimate_bytes(16 * 256 * 4, 16 * 256 * 4)
    assert share < 2 * GB, share
    result = run_isolated(RELU, source, FAST, gpu_lane)
    assert result.status != Status.OK, f"8 GB held against a share of {share / GB:.2f} GB: {describe(result)}"
