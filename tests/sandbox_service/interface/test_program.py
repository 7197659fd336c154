"""The launch program's structure, as the trusted side reads it."""

import copy

import pytest

from sandbox_service.interface.program import ProgramError, check_program

META = {"shape": [4, 8], "stride": [8, 1], "dtype": "float32"}
PROGRAM = {
    "kernels": {"copy": {"source": "def copy(x, y, BLOCK):\n    pass\n", "globals": {"tl": {"module": "triton.language"}}}},
    "constants": [],
    "sets": [{"inputs": [{"tensor": {"ref": 0, "meta": META}}], "constants": [],
              "steps": [{"op": "aten.empty_like.default", "args": [{"ref": 0}], "kwargs": {}, "out": {"ref": 1}},
                        {"launch": "copy", "args": [{"ref": 0}, {"ref": 1}],
                         "configs": [{"grid": [4], "kwargs": {"BLOCK": 8}, "options": {"num_warps": 4}}]}],
              "outputs": [{"ref": 1}]}],
}


def broken(edit) -> dict:
    program = copy.deepcopy(PROGRAM)
    edit(program)
    return program


def test_a_traced_program_passes():
    stats = check_program(PROGRAM)
    assert (stats.kernels, stats.steps, stats.launches) == (1, 2, 1)


@pytest.mark.parametrize("edit, why", [
    (lambda p: p["sets"][0]["steps"][1].update(args=[{"ref": 7}]), "used before anything made it"),
    (lambda p: p["sets"][0]["steps"][1].update(launch="other"), "unknown kernel"),
    (lambda p: p["sets"][0]["steps"][1]["configs"][0]["options"].update(extra_ptxas="-O0"), "launch option"),
    (lambda p: p["sets"][0]["steps"][1]["configs"][0].update(grid=[-1]), "grid"),
    (lambda p: p["sets"][0]["steps"][0].update(op="os.system.default"), "operator"),
    (lambda p: p["sets"][0]["steps"][0].update(args=[{"ref": 0, "x": 1}]), "tagged value"),
    (lambda p: p["kernels"]["copy"]["globals"].update(os={"object": "os"}), "module, kernel, constant"),
    (lambda p: p.update(extra=1), "exactly kernels"),
    (lambda p: p["sets"][0]["steps"][1]["configs"][0]["kwargs"].update(grid=[1]), "not a parameter"),
    (lambda p: p["sets"][0]["steps"][1]["configs"][0]["kwargs"].update(num_warps=8), "not a parameter"),
    (lambda p: p["sets"][0]["steps"][1]["configs"][0]["kwargs"].update(ir_override="/tmp/x.ptx"), "not a parameter"),
    (lambda p: p["sets"][0]["steps"][1]["configs"][0]["kwargs"].update(x=1), "not a parameter"),
    (lambda p: p["sets"][0]["steps"][1].update(args=[{"ref": 0}] * 4), "arguments for a kernel of 3"),
    (lambda p: p["kernels"]["copy"].update(source="def copy(x, y, BLOCK):\n    pass\ndef other():\n    pass\n"),
     "exactly one def"),
    (lambda p: p["kernels"].update(**{"copy\n": p["kernels"]["copy"]}), "not an identifier"),
])
def test_a_malformed_program_is_refused(edit, why):
    with pytest.raises(ProgramError, match=why):
        check_program(broken(edit))
