"""Red team 5: the executor design after the fresh trial seeds, the kept timing-check copies and the scrub.
Each test asserts the secure behaviour, so each FAILS while its flaw is there. Everything runs on the CPU.

- FINDING relaxed-policy-heavy-op-variants: under the relaxed policy the replay refuses only the operators named
  in `verifier.runtime.HEAVY_OPS`, matched by the overload packet's name. The in-place and fused variants of the
  same heavy operators are other packets and are not on the list: `addmm_`, `baddbmm_`, `addbmm_`, `addmv_`,
  `_addmm_activation`, `_int_mm`, and the convolutions' own kernels (`_slow_conv2d_forward`, `thnn_conv2d`,
  `slow_conv3d`, `slow_conv_dilated2d`, `_conv_depthwise2d`), `_trilinear`/`bilinear`. A forward that does
  `out.addmm_(a, b)` (recorded by the tracer at the dispatcher as `aten.addmm_.default`, replayed as it is) and
  launches one kernel that copies `out` onto itself is a matmul done by torch: `ok` under relaxed.
- FINDING program-file-read-through-a-link: the server checks the tracer's `program.json` (not a symlink, a
  regular file, at most 4 MB) with three path lookups and then reads it by its path again (`_read_program`),
  while the tracer, which wrote it, is still alive (it is killed only in `_execute`, after the program has
  been read and checked; a candidate owns its process and can keep a thread running past its `program` message).
  A tracer that swaps the file for a symlink between the checks and the read has the server (unjailed, its user's
  rights) read any file: a symlink to `/dev/zero` makes `read_text()` allocate without bound in the server process
  (every lane of it dies with it), one to a FIFO blocks the evaluation's thread for ever (no deadline covers it),
  and the same race grows a regular file past the size check after `stat`. `constants.safetensors` has the same
  check-then-use (`is_symlink`/`is_file`/`stat` in `_trace`, `shutil.copyfile` following links in
  `_start_executor`), with a narrower window (the tracer is killed between).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import types

from relaxed_support import MATMUL, RELAXED, decorated
from sandbox_service.evaluation import evaluate
from sandbox_service.results import Status



# FINDING relaxed-policy-heavy-op-variants
def test_a_matmul_done_by_torch_s_in_place_addmm_is_not_ok_under_the_relaxed_policy(cpu_lane):
    """The matmul problem; the candidate's forward is `torch.zeros(M, N).addmm_(a, b)` (a heavy operator, the
    in-place packet of `addmm`) and one Triton kernel that loads and stores `out` unchanged. The relaxed policy
    allows torch's light glue compute, never the heavy lifting the kernel is for: the verdict must not be `ok`
    (got `ok`: the replay computed the matmul with torch and the judge found it right)."""
    source = decorated("""
        out = torch.zeros(a.shape[0], b.shape[1], device=a.device, dtype=a.dtype)
        out.addmm_(a, b)""")
    result = evaluate(MATMUL, source, RELAXED, cpu_lane)
    assert result.status != Status.OK, (
        f"a matmul computed by torch's addmm_ (a heavy operator's in-place variant, not in HEAVY_OPS) with one "
        f"decorative kernel came back {result.status.value} under the relaxed policy "
        f"(violations {[v.rule for v in result.violations]})")


def _program(kernel: str) -> dict:
    return {"kernels": {kernel: {"source": f"def {kernel}(x):\n    pass\n", "globals": {}}}, "constants": [],
            "sets": [{"inputs": [], "steps": [], "outputs": [], "constants": []}]}


# The tracer's part, as a separate process (the tracer is one): its program file swapped, as fast as it goes,
# between a regular file holding its own program and a symbolic link to a file outside its folder.
_FLIPPER = '''
import os, sys
folder, outside, own = sys.argv[1], sys.argv[2], sys.argv[3]
regular, link, target = os.path.join(folder, ".regular"), os.path.join(folder, ".link"), os.path.join(folder, "program.json")
while True:
    with open(regular, "w") as f:
        f.write(own)
    os.replace(regular, target)
    try:
        os.symlink(outside, link)
    except FileExistsError:
        pass
    os.replace(link, target)
'''


# FINDING program-file-read-through-a-link
def test_the_server_never_reads_the_tracer_s_program_through_a_link(tmp_path):
    """The server's own reading of the launch program (`_Evaluation._read_program`, the code `_trace` runs once
    the tracer said `program`), while the still-running tracer swaps `program.json` between its own program and a
    symlink to a file outside its folder (here a program whose kernel is named `outside`; in an attack
    `/dev/zero`, a FIFO, or a file only the server may read). Every read must be of the tracer's own regular file
    or refused (`malformed-program`); it must never return what the link points to (it does, usually within the
    first few hundred reads: the checks are path lookups, the read another open of the path)."""
    from sandbox_service.evaluation import _Evaluation, _Finish
    from sandbox_service.results import EvalResult

    folder = tmp_path / "tracer"
    folder.mkdir()
    outside = tmp_path / "outside.json"
    outside.write_text(json.dumps(_program("outside")))
    own = json.dumps(_program("mine"))
    (folder / "program.json").write_text(own)
    flipper = subprocess.Popen([sys.executable, "-c", _FLIPPER, str(folder), str(outside), own])
    evaluation = types.SimpleNamespace(folder=folder, result=EvalResult(Status.INFRA_ERROR))
    evaluation._tampering = lambda rule, error: _Evaluation._tampering(evaluation, rule, error)
    seen: dict[str, int] = {}
    try:
        time.sleep(0.1)
        ends = time.monotonic() + 5.0
        while time.monotonic() < ends and not seen.get("outside"):
            try:
                name = next(iter(_Evaluation._read_program(evaluation)["kernels"]))
            except _Finish:
                name = "refused"
            seen[name] = seen.get(name, 0) + 1
    finally:
        flipper.kill()
        flipper.wait()
    assert not seen.get("outside"), (
        f"reads of the tracer's program.json while it swaps it for a link: {seen}; the server read the file "
        f"outside the tracer's folder through the link after checking that program.json was no link (a link to "
        "/dev/zero: read_text() without end in the server process)")
