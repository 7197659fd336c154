"""Red team 3: the red team 2 fixes (kernel keyword arguments, per-run timing inputs, the front's streams) and the
screen pool. Each test asserts the secure behaviour, so each FAILS while its flaw is there. Everything runs on the
CPU: the executor's own code with Triton's CUDA backend asked only for its options, the front over in-process
stand-in lane servers (as test_attack_redteam2_fanout.py does), the format layer itself.

- FINDING launch-option-as-kernel-parameter: `kernel_parameters` lets a launch's keyword argument through when the
  kernel's own `def` has a parameter of that name, and kernels.py accepts any parameter name. A kernel declared
  `def relu_1d(x_ptr, out_ptr, n, BLOCK: tl.constexpr, ir_override: tl.constexpr)` and launched with
  `ir_override="/dev/shm/x.ptx"` passes check_program and the kernel check; the replay hands the keyword to
  `kernel.run`, and Triton's JITFunction.run hands *all* its keyword arguments, the kernel's own parameters
  included, to `backend.parse_options` (`_pack_args`): the compile options then carry `ir_override` (Triton
  compiles the named IR/PTX file instead of the checked kernel) exactly as before the red team 2 fix. The same
  holds for every field of CUDAOptions (`extern_libs`, `debug`, `arch`, ...).
- FINDING screen-fence-regex-quadratic: the format layer's fence pattern (verifier/extraction.py `_FENCE`) is a
  lazy `.*?` under re.S|re.M tried from every line that opens a fence; a completion whose real ```python block
  comes first, followed by thousands of lines "```a" (opening fences that no fence ever closes), makes each of
  them scan to the end of the text: quadratic. 40 kB take about 6 s of CPU here, 80 kB past the pool's 20 s
  timeout; a text tuned to just under the timeout is screened *successfully* (its code block is the first one),
  so its author is never charged, and it holds one of the server's two screen workers (one pool for every lane
  of a server) for ~20 s: a few such completions in a batch stall every evaluation's screens (no bound per
  evaluation, `_acquire` waits for ever and is not first come first served). Past the timeout on a loaded host
  (< 50% CPU) the verdict is infra_error, which the trainer masks.
- FINDING fanout-stream-keeps-every-call: EvaluateStream's `pending` (the front) keeps the cancel function, hence
  the finished forwarded call with its response, of every request the stream ever forwarded (every retry too),
  until the stream ends. A trainer's stream lives for a whole run: the front's memory grows with every
  evaluation it ever answered (the one-process server's `jobs` list does the same with its Jobs and results).
- FINDING fanout-idle-streams-hold-every-thread: each EvaluateStream holds one of the front's gRPC handler
  threads (lanes' capacity + 32) for as long as the client keeps it open, whether or not it sends anything, and
  there is no limit of concurrent RPCs nor idle timeout. A client that opens capacity + 32 streams and sends
  nothing makes the front answer nobody (not even GetServerInfo; new calls queue inside gRPC until their
  deadline).
- FINDING timing-check-inputs-repeat: the timed runs' seeds come from the job's seed and the lane's secret alone,
  so every evaluation of a task on a lane times the same 100 input sets in the same order, and the judge's check
  set is the same in every evaluation, only at another (secret) position. Across two evaluations the check set is
  therefore the one set whose position moves: any memory across evaluations (a reused CUDA executor serves up to
  64 and does not clear freed GPU memory; the open item red team 2 left "not yet shown to matter") lets a kernel
  keep a few bytes of fingerprint per run and, from the second evaluation on, do the work in the checked run only.
"""

from __future__ import annotations

import threading
import time

import grpc
import pytest
import torch

from attack_support import HONEST
from fanout_support import StandInFront, request
from sandbox_service.convert import result_to_pb
from sandbox_service.executor import kernels as kernel_module
from sandbox_service.executor import runner
from sandbox_service.executor.replay import Replay
from sandbox_service.fanout import FanoutServicer
from sandbox_service.interface.program import ProgramError, check_program
from sandbox_service.options import CandidateFormat, Policy
from sandbox_service.results import EvalResult, Status
from sandbox_service.verifier.format import check_format
from tritonrl.sandbox.v1 import sandbox_pb2 as pb
from tritonrl.sandbox.v1 import sandbox_pb2_grpc as pb_grpc

# -- launch options through the kernel's own parameters ------------------------------------------------------------

META = {"shape": [16, 256], "stride": [256, 1], "dtype": "float32"}
TL = {"tl": {"module": "triton.language"}}
# What the tracer records for a plain ReLU kernel whose signature also names one of Triton's compile options.
KERNEL = (
    "def relu_1d(x_ptr, out_ptr, n, BLOCK: tl.constexpr, ir_override: tl.constexpr):\n"
    "    pid = tl.program_id(0)\n"
    "    offs = pid * BLOCK + tl.arange(0, BLOCK)\n"
    "    mask = offs < n\n"
    "    x = tl.load(x_ptr + offs, mask=mask)\n"
    "    tl.store(out_ptr + offs, tl.maximum(x, 0.0), mask=mask)\n"
)
PLANTED = "/dev/shm/not-the-checked-kernel.ptx"


def _program_naming_ir_override() -> dict:
    x, out = {"ref": 0}, {"ref": 1}
    return {"kernels": {"relu_1d": {"source": KERNEL, "globals": TL}}, "constants": [],
            "sets": [{"inputs": [{"tensor": {"ref": 0, "meta": META}}], "constants": [],
                      "steps": [{"op": "aten.empty_like.default", "args": [x], "kwargs": {}, "out": out},
                                {"launch": "relu_1d", "args": [x, out, 4096],
                                 "configs": [{"grid": [4], "kwargs": {"BLOCK": 1024, "ir_override": PLANTED},
                                              "options": {}}]}],
                      "outputs": [out]}]}


# FINDING launch-option-as-kernel-parameter
def test_a_kernel_parameter_named_like_a_compile_option_never_becomes_one():
    program = _program_naming_ir_override()
    try:
        check_program(program)
        kernel_module.check_kernels(program["kernels"])
    except (ProgramError, kernel_module.IllegalKernel):
        return  # refused before anything reaches Triton
    seen: dict = {}

    class Kernel:
        @staticmethod
        def run(*args, **kwargs):
            seen.update(kwargs)

    class Kernels:
        relu_1d = Kernel

    Replay(program["sets"][0], Kernels, {}, torch.device("cpu"), Policy.STRICT).run([torch.randn(16, 256)])
    from triton.backends.compiler import GPUTarget
    from triton.backends.nvidia.compiler import CUDABackend

    # JITFunction.run -> _pack_args -> backend.parse_options(kwargs): every keyword, parameters included.
    options = CUDABackend(GPUTarget("cuda", 90, 32)).parse_options(
        {k: v for k, v in seen.items() if k not in ("grid", "warmup")})
    assert options.ir_override is None, (
        f"a kernel that names `ir_override` as its own parameter passes check_program and kernels.py, and the "
        f"launch's keyword reaches Triton's compile options: ir_override={options.ir_override!r} (the executor "
        f"would compile that file, not the checked kernel)")


# -- the format layer's fence pattern ------------------------------------------------------------------------------


# FINDING screen-fence-regex-quadratic
def test_the_format_screen_is_linear_in_the_completion():
    """An honest candidate's block, then 8000 lines of "```a" (40 kB): the format layer must stay at the
    screens' usual milliseconds (500 kB sources take 0.3 s), not hold a shared screen worker for seconds."""
    text = "Here is my kernel.\n```python\n" + HONEST + "```\n" + "```a\n" * 8000
    started = time.process_time()
    checked = check_format(text, CandidateFormat.AUTO, 512 * 1024)
    spent = time.process_time() - started
    assert not checked.violations, [v.rule for v in checked.violations]  # it passes: nobody is charged
    assert spent < 1.0, (f"the format layer took {spent:.1f} s of CPU on a {len(text) // 1024} kB completion that "
                         f"passes it (quadratic fence search); 80 kB pass the screen pool's 20 s timeout")


# -- the front's streams -------------------------------------------------------------------------------------------


class _InstantLane(pb_grpc.SandboxServicer):
    def Evaluate(self, request, context):
        return pb.EvaluateResponse(request_id=request.request_id, result=result_to_pb(EvalResult(Status.OK)))

    def GetServerInfo(self, request, context):
        return pb.ServerInfo(backend="interpreter", workers=1, queue_capacity=1)


@pytest.fixture
def front():
    made = StandInFront(2, 2, _InstantLane)  # the front's own thread count (FanoutServer's sizing)
    yield made
    made.close()


# FINDING fanout-stream-keeps-every-call
def test_a_long_stream_does_not_keep_every_answered_call(front, monkeypatch):
    """One stream, 60 requests answered while it stays open: what the front keeps for the stream must be
    bounded by what is in flight (at most the lanes' room), not grow with every request ever answered."""
    kept: list[list] = []
    real_call = FanoutServicer.call

    def call(self, method, request, timeout, on_cancel=None, in_flight=None):
        if in_flight is not None and not any(in_flight is k for k in kept):
            kept.append(in_flight)  # what the stream keeps of its forwarded calls
        return real_call(self, method, request, timeout, on_cancel, in_flight)

    monkeypatch.setattr(FanoutServicer, "call", call)
    release = threading.Event()

    def requests():
        for index in range(60):
            yield request(f"r{index}")
        release.wait(30)  # the trainer's stream stays open

    responses = front.stub.EvaluateStream(requests(), timeout=60)
    answered = [next(responses) for _ in range(60)]
    try:
        assert len(answered) == 60 and len(kept) == 1
        held = len(kept[0])
        room = 4  # two stand-in lanes of capacity 2
        assert held <= room, (f"after 60 answered requests the open stream still holds {held} forwarded calls "
                              f"(with their responses): it grows with every request for the stream's whole life")
    finally:
        release.set()
        list(responses)


# FINDING fanout-idle-streams-hold-every-thread
def test_idle_streams_cannot_keep_the_front_from_answering_others(front):
    release = threading.Event()

    def nothing():
        release.wait(60)  # an open stream that sends nothing
        return
        yield

    streams = [front.stub.EvaluateStream(nothing(), timeout=90) for _ in range(front.threads)]
    try:
        time.sleep(2.0)  # the front's handlers start
        try:
            front.stub.GetServerInfo(pb.ServerInfoRequest(), timeout=5.0)
        except grpc.RpcError as exc:
            pytest.fail(f"{front.threads} open streams that send nothing keep the front from answering anybody "
                        f"({exc.code().name}): each holds a gRPC thread for as long as its client likes")
    finally:
        release.set()
        for stream in streams:
            try:
                list(stream)
            except grpc.RpcError:
                pass


# -- the timing check's inputs across evaluations ------------------------------------------------------------------


# FINDING timing-check-inputs-repeat
def test_the_timing_check_s_inputs_are_new_in_every_evaluation():
    """Two evaluations of one task on one lane, each timed with the server's order (evaluation.timing_order)
    and its inputs made the way runner._time_checked makes them. A kernel that remembers a fingerprint per
    run from the first must find nothing of it in the second: no set repeats, the checks' least of all."""
    from sandbox_service.evaluation import timing_order

    class Reference:
        @staticmethod
        def get_inputs():
            return [torch.randn(8)]

    job = {"timing_runs": 100, "warmup_runs": 3, "trial_key": "lane-secret", "max_timing_checks": 1, "trials": 5}

    def evaluation() -> list[tuple]:
        order = timing_order(job["timing_runs"], 5)
        timed = runner.timing_inputs(job, Reference, order["run_seed"], torch.device("cpu"))
        for run, seed in zip(order["checked_runs"], order["check_seeds"]):
            timed.replace_seed(run, seed)  # as _time_checked does with the order's checks
        return [tuple(timed(i)[0].tolist()) for i in range(job["timing_runs"])]

    first, second = evaluation(), evaluation()
    repeated = sum(1 for fingerprint in second if fingerprint in set(first))
    assert repeated == 0, f"{repeated}/100 timed input sets of the second evaluation are the first's"
