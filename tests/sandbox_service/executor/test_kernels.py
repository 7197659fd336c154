"""The kernel check: what a launch program's kernel may name before trusted code compiles it."""

import pytest

from sandbox_service.executor.kernels import IllegalKernel, check_kernels, module_source

TL = {"tl": {"module": "triton.language"}}
HONEST = (
    "def add(x, y, out, n, BLOCK: tl.constexpr):\n"
    "    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)\n"
    "    acc = tl.zeros([BLOCK], dtype=tl.float32) + tl.load(x + i, mask=i < n)\n"
    "    tl.store(out + i, tl.maximum(acc, tl.load(y + i, mask=i < n)), mask=i < n)\n"
)


def kernel(body: str, globals_: dict | None = None) -> dict:
    return {"add": {"source": "def add(x, out, n, BLOCK: tl.constexpr):\n" + body, "globals": globals_ or TL}}


def test_an_honest_kernel_passes_and_becomes_a_module_of_checked_pieces():
    kernels = {"add": {"source": HONEST, "globals": TL}}
    checked = check_kernels(kernels)
    source = module_source(kernels, checked)
    assert "import triton.language as tl" in source and "@triton.jit" in source
    assert "def add(x, y, out, n, BLOCK: tl.constexpr):" in source and "tl.maximum(acc" in source


@pytest.mark.parametrize("body, why", [
    ("    leak(n)\n", "neither a parameter"),
    ("    triton.runtime.jit.os.system('x')\n", "triton.runtime"),
    ("    x.__class__\n", "attribute '__class__'"),
    ("    f = lambda v: v\n", "Lambda"),
    ("    import os\n", "Import"),
    ("    tl.core.builtin\n", "not one a Triton kernel may use"),
    ("    [v for v in range(3)]\n", "ListComp"),
    ("    __import__('os')\n", "neither a parameter"),
    ("    t = triton\n    t.runtime\n", "used as a value"),
    ("    (triton if True else tl).runtime.jit\n", "no Triton value has"),
    ("    (triton if True else tl)\n", "used as a value"),
    ("    tl.load = tl.store\n", "attribute assignment"),
    ("    x.handle.data\n", "no Triton value has"),
    ("    s = 'a\\ndef add(x):'\n", "line break"),
])
def test_anything_beyond_triton_s_language_is_refused(body, why):
    globals_ = {**TL, "triton": {"module": "triton"}}
    with pytest.raises(IllegalKernel, match=why.replace("(", r"\(").replace(")", r"\)")):
        check_kernels(kernel(body, globals_))


def test_a_module_outside_the_allow_list_is_refused():
    with pytest.raises(IllegalKernel, match="not one a Triton kernel may use"):
        check_kernels(kernel("    pass\n", {"tl": {"module": "os"}}))


def test_a_default_that_runs_code_is_refused():
    kernels = {"add": {"source": "def add(x, n=print('x')):\n    pass\n", "globals": TL}}
    with pytest.raises(IllegalKernel, match="default"):
        check_kernels(kernels)


def test_a_decorated_or_renamed_definition_is_refused():
    with pytest.raises(IllegalKernel, match="without decorators"):
        check_kernels({"add": {"source": "@print\ndef add(x):\n    pass\n", "globals": TL}})
    with pytest.raises(IllegalKernel, match="without decorators"):
        check_kernels({"add": {"source": "def other(x):\n    pass\n", "globals": TL}})


def test_the_module_is_written_from_the_checked_tree_not_the_candidate_s_text():
    """A docstring holding another `def` (the interpreter re-reads a kernel's lines and takes the last one)
    does not reach the module."""
    source = HONEST.replace("):\n", '):\n    """doc\n    def add(x): import os"""\n', 1)
    kernels = {"add": {"source": source, "globals": TL}}
    written = module_source(kernels, check_kernels(kernels))
    assert "import os" not in written and written.count("def add") == 1
