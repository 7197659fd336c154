"""The trusted builder: it hands out only modules it built itself (by content hash), refuses requests no honest
Triton makes, and compiles each PTX once (ptxas for jailed candidates, which may not start a process)."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from sandbox_service.worker import builder as builder_module
from sandbox_service.worker.builder import Builder

CONFIG = {"library_dirs": [], "include_dirs": [], "libraries": []}


def make_builder(root: Path) -> Builder:
    """A builder without asking Triton's CUDA driver for its folders (this machine has none)."""
    made = Builder.__new__(Builder)
    made.root, made.config, made.built, made.cubins = root, dict(CONFIG), {}, builder_module.collections.OrderedDict()
    root.mkdir(parents=True, exist_ok=True)
    return made


def test_a_file_planted_in_the_cache_is_built_again_and_the_answer_carries_the_real_hash(tmp_path, monkeypatch):
    builder = make_builder(tmp_path / "builds")
    compiled = []

    def compile_(name, source, target):
        compiled.append(name)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(b"built by the builder " + source.encode())

    monkeypatch.setattr(builder, "_compile", compile_)
    request = {"name": "launcher", "source": "int f(void) { return 1; }", **CONFIG}
    key = builder_module.content_key("launcher", request["source"], CONFIG)
    planted = tmp_path / "builds" / key
    planted.mkdir(parents=True)
    suffix = builder_module.sysconfig.get_config_var("EXT_SUFFIX")
    (planted / f"launcher{suffix}").write_bytes(b"planted by a candidate")

    answer = builder.build(request)
    content = Path(answer["path"]).read_bytes()
    assert compiled == ["launcher"] and content.startswith(b"built by the builder")
    assert answer["sha256"] == hashlib.sha256(content).hexdigest()
    Path(answer["path"]).write_bytes(b"changed after the build")  # changed behind its back: built again
    assert builder.build(request)["sha256"] == answer["sha256"] and compiled == ["launcher", "launcher"]


@pytest.mark.parametrize("request_", [
    {"ptx": 3, "capability": 90, "enable_fp_fusion": True},
    {"ptx": "x", "capability": "90", "enable_fp_fusion": True},
    {"ptx": "x", "capability": 9000, "enable_fp_fusion": True},
    {"ptx": "x", "capability": 90, "enable_fp_fusion": "yes"},
    {"ptx": "x" * (builder_module.MAX_PTX_BYTES + 1), "capability": 90, "enable_fp_fusion": True},
])
def test_malformed_ptxas_requests_are_refused(tmp_path, request_):
    assert make_builder(tmp_path).ptxas(request_)["type"] == "refused"


def test_each_ptx_goes_through_ptxas_once(tmp_path, monkeypatch):
    from triton.backends.nvidia.compiler import CUDABackend

    calls = []

    def make_cubin(self, src, metadata, opt, capability):
        calls.append((src, opt.enable_fp_fusion, capability))
        return f"cubin of {src}".encode()

    monkeypatch.setattr(CUDABackend, "make_cubin", make_cubin)
    builder = make_builder(tmp_path)
    first = builder.ptxas({"ptx": "a", "capability": 90, "enable_fp_fusion": True})
    again = builder.ptxas({"ptx": "a", "capability": 90, "enable_fp_fusion": True})
    other = builder.ptxas({"ptx": "a", "capability": 90, "enable_fp_fusion": False})
    assert first == again == {"type": "cubin", "cubin": b"cubin of a".hex()} and other["type"] == "cubin"
    assert calls == [("a", True, 90), ("a", False, 90)]


HONEST_LAUNCHER = '#include "cuda.h"\n#include <stdbool.h>\n#define PY_SSIZE_T_CLEAN\n#include <Python.h>\n' \
                  '#include <dlfcn.h>\nstatic int f(void) { return 0; }\n'


@pytest.mark.parametrize("source", [
    HONEST_LAUNCHER + '#include "/work/candidate/fifo"\n',
    HONEST_LAUNCHER + "#include </dev/zero>\n",
    HONEST_LAUNCHER + "  #  include_next \"/etc/shadow\"\n",
    HONEST_LAUNCHER + '#\\\ninclude "/etc/shadow"\n',
    HONEST_LAUNCHER + '#/* hidden */include "/etc/shadow"\n',
    HONEST_LAUNCHER + '#define H "/dev/zero"\n#include H\n',
    HONEST_LAUNCHER + '%:include "/dev/zero"\n',
    HONEST_LAUNCHER + '#embed "/dev/zero"\n',
])
def test_a_launcher_that_names_another_file_is_refused_before_gcc_reads_it(tmp_path, monkeypatch, source):
    builder = make_builder(tmp_path / "builds")
    monkeypatch.setattr(builder, "_compile", lambda *a: pytest.fail("compiled a refused source"))
    answer = builder.build({"name": "launcher", "source": source, **CONFIG})
    assert answer["type"] == "refused", answer


def test_an_honest_launcher_s_headers_pass():
    assert builder_module.header_problem(HONEST_LAUNCHER) is None
