"""The builder: a long-lived, trusted process that compiles Triton's C modules for candidate processes.

Triton (3.6 on the GPU image) compiles a small C launcher with gcc for every new kernel signature, and
its driver utilities once per cache folder: about a second of CPU per fresh process, more than the
kernel's own compilation. Candidate processes have private Triton caches (a candidate must never be
able to plant a compiled artifact that another candidate will load), so without help each one would
pay that again. Instead a candidate's Triton asks the server, which asks this process: it compiles the
exact C source it is given, with its own include and library folders (never the candidate's), into a
cache addressed by the hash of that source, and answers with the path and the SHA-256 of the file it
built. A candidate loads a module only if the source of its own request hashes to it and the copy it
loads has that content; a file in the cache that this process did not build in its own life is built
again, never trusted. So the worst a hostile candidate can do is have an extra module compiled that
nobody else will ever load. This process never loads what it compiles.

It also runs ptxas for candidates (`ptxas` requests): a jailed candidate may not start a process, so its
Triton hands the PTX here and gets the cubin back. The command is Triton's own, with options parsed from
an allow-list (fp fusion only; never extra ptxas flags from the request).
"""

from __future__ import annotations

import collections
import hashlib
import inspect
import os
import re
import shutil
import sysconfig
import tempfile
from pathlib import Path

from sandbox_service.worker import protocol

MAX_SOURCE_BYTES = 1 << 20
# The headers Triton's launchers include. The source comes from the candidate's process, and a directive that
# names a file (a FIFO in its folder, /dev/zero, a file only the builder may read) would have gcc read it here.
ALLOWED_HEADERS = frozenset({
    '"cuda.h"', "<cuda.h>", "<Python.h>", "<dlfcn.h>", "<stdalign.h>", "<stdbool.h>", "<stddef.h>", "<stdint.h>",
    "<stdio.h>", "<stdlib.h>", "<string.h>", "<assert.h>", "<math.h>",
})
_FILE_DIRECTIVES = ("include", "include_next", "import", "embed")
_COMMENT = re.compile(r"/\*.*?\*/|//[^\n]*", re.S)
_DIRECTIVE = re.compile(r"^\s*#\s*(\w+)\s*(.*?)\s*$")


def header_problem(source: str) -> str | None:
    """Why `source` may not be compiled here (a header off the allow-list, or a spelling that hides one)."""
    if "??=" in source or "%:" in source:
        return "trigraphs or digraphs in a launcher's source"
    text = _COMMENT.sub(" ", source.replace("\\\n", ""))
    for line in text.splitlines():
        found = _DIRECTIVE.match(line)
        if found and found.group(1) in _FILE_DIRECTIVES and found.group(2) not in ALLOWED_HEADERS:
            return f"#{found.group(1)} {found.group(2)[:200]} is not a header Triton's launchers include"
    return None


def _triton_build_config() -> dict[str, list[str]]:
    """The folders and libraries Triton's NVIDIA driver builds with, as this trusted process sees them."""
    from triton.backends.nvidia import driver

    library_dirs = driver.library_dirs() if callable(driver.library_dirs) else list(driver.library_dirs)
    include_dirs = getattr(driver, "include_dirs", None) or getattr(driver, "include_dir", [])
    return {"library_dirs": list(library_dirs), "include_dirs": list(include_dirs), "libraries": list(driver.libraries)}


def content_key(name: str, source: str, config: dict[str, list[str]]) -> str:
    digest = hashlib.sha256()
    for part in (name, source, repr(sorted(config.items()))):
        digest.update(part.encode())
        digest.update(b"\0")
    return digest.hexdigest()


def file_sha256(path: Path | str) -> str:
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


MAX_PTX_BYTES = 64 << 20
CUBIN_CACHE_ENTRIES = 4096  # compiled cubins kept in memory (a GRPO group's candidates often share kernels)


class Builder:
    def __init__(self, root: Path):
        self.root = root
        self.config = _triton_build_config()
        self.built: dict[str, str] = {}  # content key -> SHA-256 of the module this process built for it
        self.cubins: collections.OrderedDict[str, str] = collections.OrderedDict()  # request hash -> cubin (hex)

    def build(self, request: dict) -> dict:
        name, source = str(request["name"]), str(request["source"])
        if not name.replace("_", "").isalnum() or len(source) > MAX_SOURCE_BYTES:
            return {"type": "refused", "error": "bad module name or source too large"}
        if problem := header_problem(source):
            return {"type": "refused", "error": problem}
        wanted = {k: list(request.get(k) or []) for k in ("library_dirs", "include_dirs", "libraries")}
        if wanted != self.config:
            return {"type": "refused", "error": "build folders differ from the trusted builder's"}
        key = content_key(name, source, self.config)
        suffix = sysconfig.get_config_var("EXT_SUFFIX")
        target = self.root / key / f"{name}{suffix}"
        if key not in self.built or not target.exists() or file_sha256(target) != self.built[key]:
            self._compile(name, source, target)
            self.built[key] = file_sha256(target)
        return {"type": "built", "path": str(target), "key": key, "sha256": self.built[key]}

    def ptxas(self, request: dict) -> dict:
        """The cubin for a candidate's PTX, by Triton's own `make_cubin` with trusted options."""
        ptx, capability, fp_fusion = request.get("ptx"), request.get("capability"), request.get("enable_fp_fusion")
        if not (isinstance(ptx, str) and len(ptx) <= MAX_PTX_BYTES and isinstance(capability, int)
                and 50 <= capability <= 200 and isinstance(fp_fusion, bool)):
            return {"type": "refused", "error": "malformed ptxas request"}
        key = hashlib.sha256(f"{capability}\0{fp_fusion}\0{ptx}".encode()).hexdigest()
        if key in self.cubins:  # this process compiled it: the same PTX and options give the same cubin
            self.cubins.move_to_end(key)
            return {"type": "cubin", "cubin": self.cubins[key]}
        from triton.backends.compiler import GPUTarget
        from triton.backends.nvidia.compiler import CUDABackend

        backend = CUDABackend(GPUTarget("cuda", capability, 32))
        options = backend.parse_options({"enable_fp_fusion": fp_fusion})
        try:
            cubin = backend.make_cubin(ptx, {}, options, capability).hex()
        except Exception as exc:  # noqa: BLE001 - ptxas rejecting the candidate's PTX is its compile error
            return {"type": "failed", "error": f"{type(exc).__name__}: {exc}"[:4000]}
        self.cubins[key] = cubin
        if len(self.cubins) > CUBIN_CACHE_ENTRIES:
            self.cubins.popitem(last=False)
        return {"type": "cubin", "cubin": cubin}

    def _compile(self, name: str, source: str, target: Path) -> None:
        from triton.runtime import build as triton_build

        with tempfile.TemporaryDirectory(dir=self.root) as scratch:
            src = Path(scratch) / "main.c"
            src.write_text(source)
            parameters = inspect.signature(triton_build._build).parameters
            extra = {"ccflags": []} if "ccflags" in parameters else {}
            so = triton_build._build(name, str(src), scratch, self.config["library_dirs"], self.config["include_dirs"],
                                     self.config["libraries"], **extra)
            target.parent.mkdir(parents=True, exist_ok=True)
            partial = target.with_suffix(".partial")
            shutil.copyfile(so, partial)
            os.replace(partial, target)


def serve(control: protocol.Receiver, report_fd: int) -> int:
    root = Path(os.environ["TRITONRL_TRUSTED_BUILDS"])
    root.mkdir(parents=True, exist_ok=True)
    unavailable = ""
    try:
        builder = Builder(root)
    except Exception as exc:  # noqa: BLE001 - without a builder, candidates build for themselves
        builder, unavailable = None, f"no builder: {type(exc).__name__}: {exc}"
    while True:
        try:
            request = control.receive()
        except protocol.ChannelClosed:
            return 0
        if builder is None:
            answer = {"type": "refused", "error": unavailable}
        else:
            try:
                answer = builder.ptxas(request) if request.get("op") == "ptxas" else builder.build(request)
            except Exception as exc:  # noqa: BLE001 - a failed build is the requester's problem
                answer = {"type": "failed", "error": f"{type(exc).__name__}: {exc}"[:2000]}
        answer["id"] = request.get("id")
        protocol.send(report_fd, answer)
