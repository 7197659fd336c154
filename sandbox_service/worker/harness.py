"""Helpers shared by the child processes: loading modules, seeding, inputs, outputs, fingerprints.

Runs only inside children (imports torch). Reference and candidate are built after the same seed, and
every trial's inputs come from the reference's `get_inputs()` under that trial's seed, so the reference child
and the candidate child produce identical inputs independently (checked by fingerprint).
"""

from __future__ import annotations

import hashlib
import importlib.util
import random
import re
import sys
import traceback
import types
from pathlib import Path
from typing import Any

import torch

from sandbox_service.results import truncate


def enable_interpreter_autotune() -> None:
    """Let @triton.autotune run under TRITON_INTERPRET=1, where there is no GPU to benchmark on.

    Triton asks the (absent) GPU driver for a benchmarker and fails; timings mean nothing on the
    interpreter anyway, so every config scores the same and the autotuner keeps the first one.
    """
    from triton.runtime.autotuner import Autotuner

    Autotuner.do_bench = property(lambda self: lambda kernel_call, quantiles: [1.0 for _ in quantiles])


def backport_interpreter_fixes() -> None:
    """Two upstream fixes for TRITON_INTERPRET=1 that older Triton/torch releases lack (the GPU image has
    torch 2.11 + Triton 3.6 + NumPy 2.5); without them honest kernels end `runtime_error` in this lane.
    Each behaves as the fixed release does, and is skipped where it cannot matter. No candidate has run yet.
    """
    _interpreter_index_squeezes()
    _wrap_triton_accepts_interpreted_kernels()


def _interpreter_index_squeezes() -> None:
    """triton-lang/triton#9171 (fixed in later releases; 3.9 has it): the interpreter's `tl.tensor.__index__` is
    `int(handle.data)`, and a scalar's data is a 1-element 1-d array, which NumPy >= 2.4 refuses to convert
    (`TypeError: only 0-dimensional arrays can be converted to Python scalars`): `range(tl.cdiv(K, BLOCK))`
    in a kernel fails. The fix converts `handle.data.squeeze()`; installed whenever NumPy refuses (on a Triton
    that has the fix it is the same function)."""
    import numpy as np

    try:
        int(np.ones(1))
        return  # NumPy < 2.4 still converts it
    except TypeError:
        pass
    try:
        from triton.runtime import interpreter
    except ImportError:
        return
    original = getattr(interpreter, "_patch_lang_tensor", None)
    if original is None or getattr(original, "_squeezes_index", False):
        return

    def index(self) -> int:
        return int(self.handle.data.squeeze())

    def patch_lang_tensor(tensor, *args, **kwargs):  # (tensor, scope) on Triton 3.6+; the scope undoes it
        original(tensor, *args, **kwargs)
        scope = args[0] if args else kwargs.get("scope")
        if scope is not None:
            scope.set_attr(tensor, "__index__", index)
        else:
            tensor.__index__ = index

    patch_lang_tensor._squeezes_index = True
    interpreter._patch_lang_tensor = patch_lang_tensor


def _wrap_triton_accepts_interpreted_kernels() -> None:
    """pytorch/pytorch#152868 (fixed by #185597; torch 2.13 has it): `torch.library.wrap_triton` accepts only
    JITFunction/Autotuner, and under TRITON_INTERPRET=1 `@triton.jit` makes an InterpretedFunction, so every
    `triton_op` body raises "wrap_triton only works on functions annotated with triton.jit or
    triton.autotune". The fix returns an interpreted kernel (or an autotuner/heuristics chain around one)
    unchanged, for eager launch."""
    try:
        import torch._library.triton as torch_triton
        from triton.runtime.autotuner import Autotuner, Heuristics
        from triton.runtime.interpreter import InterpretedFunction
    except ImportError:
        return
    original = torch_triton.wrap_triton
    try:
        original(InterpretedFunction(lambda: None))
        return  # this torch already accepts it
    except Exception:  # noqa: BLE001 - RuntimeError on torch 2.11; whatever it is, the wrapper below is right
        pass

    def wrap_triton(triton_kernel, /):
        kernel, seen = triton_kernel, set()
        while isinstance(kernel, (Autotuner, Heuristics)) and id(kernel) not in seen:
            seen.add(id(kernel))
            kernel = kernel.fn
        if isinstance(kernel, InterpretedFunction):
            return triton_kernel
        return original(triton_kernel)

    wrap_triton.__wrapped__ = original
    wrap_triton.__doc__ = original.__doc__
    for name, module in list(sys.modules.items()):  # torch.library and torch._library re-export it
        if name == "torch" or name.startswith("torch."):
            for attribute, value in list(getattr(module, "__dict__", {}).items()):
                if value is original:
                    setattr(module, attribute, wrap_triton)


def prepare_template(backend: str, warmup: str = "all") -> list[str]:
    """First-use costs paid once in the template process, before it forks children (see child_main).

    Never initialises the CUDA driver: a forked child of a process that did cannot use CUDA. With the
    `cuda` backend this builds Triton's driver utilities (a C module) into the template's own, trusted
    Triton cache and loads them; torch's CUDA check goes through NVML (PYTORCH_NVML_BASED_CUDA_CHECK).
    """
    import torch._dynamo  # noqa: F401 - the runtime monitor needs it; seconds to import

    warnings: list[str] = []
    _import_child_modules()
    if backend != "cuda":
        enable_interpreter_autotune()
        backport_interpreter_fixes()
        return warnings
    steps = []
    if warmup in ("all", "compiler", "driver"):
        steps.append(_import_triton_compiler)
    if warmup in ("all", "driver"):
        steps.append(_load_triton_driver)
    for step in steps:
        try:
            step()
        except Exception as exc:  # noqa: BLE001 - an optimisation must never stop the template
            warnings.append(f"template warm-up {step.__name__} skipped: {type(exc).__name__}: {exc}")
    if torch.cuda.is_initialized():
        warnings.append("CUDA got initialised in the template; children may fail to use the GPU")
    return warnings


# Modules every child imported on its own, found with TRITONRL_PROFILE_DIR (the `.modules` files): on the
# GPU image their sources are compiled at each import (no bytecode cache), 0.2 s of every evaluation.
CHILD_MODULES = (
    "numpy.ctypeslib",
    "safetensors.torch",
    "sandbox_service.timing",
    "triton.compiler.code_generator",
    "triton.experimental.gluon",  # Triton >= 3.4 imports it at a kernel's first launch
    "triton.runtime.interpreter",  # the runtime monitor wraps its launcher too
)


def _import_child_modules() -> None:
    """Import what children would each import again; a module this Triton lacks is skipped."""
    import importlib

    for name in CHILD_MODULES:
        try:
            importlib.import_module(name)
        except ImportError:
            pass


def _import_triton_compiler() -> None:
    import triton.compiler.compiler  # noqa: F401
    from triton.runtime.cache import triton_key

    import triton.backends.nvidia.compiler  # noqa: F401

    triton_key()  # a hash of Triton's own sources, part of every kernel's cache key: ~0.1 s
    _find_ptxas()


def _find_ptxas() -> None:
    """Triton runs `ptxas --version` (cached per process) while it compiles a kernel: here, once, since a
    jailed candidate may not start a process (its cubins come from the trusted builder)."""
    import triton
    from triton.backends.nvidia import compiler

    for name in ("ptxas", "ptxas_blackwell"):
        tool = getattr(triton.knobs.nvidia, name, None)
        getattr(tool, "version", None)
    for arch in (80, 90, 100):
        try:
            compiler.get_ptxas_version(arch)
        except TypeError:
            compiler.get_ptxas_version()
            return


def _load_triton_driver() -> None:
    """Build and load Triton's driver utilities (a C module) without asking whether CUDA is there: that
    question (torch.cuda.is_available) would initialise NVML or the CUDA driver before the fork."""
    import triton
    from triton.backends.nvidia.driver import CudaDriver

    triton.runtime.driver.set_active(CudaDriver())


def set_threads(threads: int) -> None:
    torch.set_num_threads(max(1, threads))


def init_cuda() -> None:
    """Create this process's CUDA context and Triton's view of the device before the job arrives."""
    import triton

    torch.cuda.init()
    torch.empty(1, device="cuda")
    torch.cuda.synchronize()
    triton.runtime.driver.active.get_current_target()
    _cache_device_properties(torch.cuda.current_device())


def _cache_device_properties(device: int) -> None:
    """Triton asks the driver for the device's properties at every compilation; with many processes making
    and dropping CUDA contexts that call waited 0.1 s on the driver (profiled on an H100). The answers
    never change in a process, so it asks once, here, before the job (and the candidate) arrives."""
    import triton

    utils = triton.runtime.driver.active.utils
    query = getattr(utils, "get_device_properties", None)
    if query is None:
        return
    known = {device: query(device)}

    def get_device_properties(index):
        if index not in known:
            known[index] = query(index)
        return dict(known[index])

    utils.get_device_properties = get_device_properties


def install_remote_build(request_build) -> bool:
    """Route Triton's C-module builds (its per-signature kernel launchers) through `request_build`.

    `request_build(name, source, library_dirs, include_dirs, libraries)` returns (path, sha256) of a module the
    trusted builder compiled from exactly that source (content-addressed, so no candidate can plant a
    module another candidate will load). The module is copied into this process's own folder and loaded only
    if the copy has that content. Returns whether Triton has the hook.
    """
    import hashlib
    import shutil
    import sysconfig

    import triton

    build = getattr(getattr(triton, "knobs", None), "build", None)
    if build is None or not hasattr(build, "impl"):
        return False

    def impl(name, src, srcdir, library_dirs, include_dirs, libraries, *args, **kwargs):
        built, sha256 = request_build(name, Path(src).read_text(), list(library_dirs), list(include_dirs),
                                      list(libraries))
        target = Path(srcdir) / f"{name}{sysconfig.get_config_var('EXT_SUFFIX')}"
        shutil.copyfile(built, target)
        if hashlib.sha256(target.read_bytes()).hexdigest() != sha256:
            raise RuntimeError(f"sandbox: the trusted build {built} changed after it was built; not loading it")
        return str(target)

    build.impl = impl
    return True


def install_remote_ptxas(request_cubin) -> None:
    """Route Triton's PTX-to-cubin step (a ptxas process, which a jailed candidate may not start) through
    `request_cubin(ptx, arch, options)`, answered by the trusted builder with `cubin` (hex) or `error`."""
    from triton.backends.nvidia import compiler

    def make_cubin(self, src, metadata, opt, capability):
        answer = request_cubin(src, compiler.sm_arch_from_capability(capability),
                               {"capability": int(capability), "enable_fp_fusion": bool(opt.enable_fp_fusion)})
        if "cubin" not in answer:
            raise compiler.PTXASError(f"ptxas (trusted builder): {answer.get('error', 'no cubin')}")
        return bytes.fromhex(answer["cubin"])

    compiler.CUDABackend.make_cubin = make_cubin


def release_memory(device: torch.device) -> bool:
    """Give back what finished work left: unreachable objects, then the allocator's cached GPU blocks.
    False when the device is broken (an earlier kernel failed: a CUDA context cannot recover from that)."""
    import gc

    gc.collect()
    if device.type != "cuda":
        return True
    try:
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
        return True
    except Exception:  # noqa: BLE001 - any CUDA error here means the context is unusable
        return False


def forget_problem_modules() -> None:
    """Drop the reference modules `load_problem_sets` registered."""
    for name in [n for n in sys.modules if n.startswith("tritonrl_reference")]:
        del sys.modules[name]


def device_for(backend: str) -> torch.device:
    return torch.device("cuda:0" if backend == "cuda" else "cpu")


def device_name(backend: str) -> str:
    if backend == "cuda":
        return torch.cuda.get_device_name(0)
    return "cpu (triton interpreter)"


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def load_module(path: str | Path, name: str):
    """Import a source file as a module (Triton needs @triton.jit functions to live in a real file)."""
    spec = importlib.util.spec_from_file_location(name, str(path))
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


DEFAULT_SET = "default"


def load_problem_sets(reference_path: str | Path, input_sets: list[dict], seed: int) -> list[tuple[str, Any]]:
    """The reference module once per input set: [("default", module), (name, module with the set's
    get_inputs / get_init_inputs), ...]. Each is executed after the same seed, so module-level randomness
    is the same in every process that loads it."""
    return problem_sets_from_source(Path(reference_path).read_text(), str(reference_path), input_sets, seed)


def problem_sets_from_source(source: str, filename: str, input_sets: list[dict], seed: int) -> list[tuple[str, Any]]:
    """load_problem_sets from the reference's text (the judge gets it in its request, never from a file a
    candidate could write); `filename` names it in tracebacks, and its lines are registered with linecache
    so that code reading its own source (inspect, TorchScript) finds them."""
    import linecache

    if not Path(filename).is_file():
        linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    code = compile(source, filename, "exec")
    loaded = []
    for index, input_set in enumerate([None, *input_sets]):
        name = DEFAULT_SET if input_set is None else input_set["name"]
        module = types.ModuleType("tritonrl_reference" if index == 0 else f"tritonrl_reference_{index}")
        module.__file__ = filename
        sys.modules[module.__name__] = module
        seed_everything(seed)
        exec(code, module.__dict__)  # noqa: S102 - the reference is trusted code
        if input_set is not None:
            exec(compile(input_set["source"], f"<input set {name}>", "exec"), module.__dict__)  # noqa: S102
        loaded.append((name, module))
    return loaded


def seed_everything(seed: int) -> None:
    """What torch.manual_seed does for the CPU and every GPU, without its ~100 us of per-backend checks once
    CUDA is up (the executor seeds once per timed run: that cost sat right before every run)."""
    random.seed(seed)
    if torch.cuda.is_initialized():
        torch.default_generator.manual_seed(seed)
        for generator in torch.cuda.default_generators:
            generator.manual_seed(seed)
    else:
        torch.manual_seed(seed)
    try:
        import numpy as np

        np.random.seed(seed % (2**32))
    except ImportError:
        pass


def trial_seeds(seed: int, trials: int, key: str = "") -> list[int]:
    """Distinct, reproducible per-trial seeds derived from the evaluation seed and, for evaluations, the
    lane's secret `key`: the candidate knows the seed (its parameters are made under it) but must not be able
    to make the trials' inputs itself, or it could ship their answers as constants. With a key, each seed is
    a keyed hash of the seed and its index, on its own: seeds from one pseudo-random stream (a Mersenne
    Twister's outputs are linear in its state) let a kernel that recovered 624 timed runs' seeds from their
    inputs compute every later one, and so tell a timing check's seed (drawn apart) from an ordinary run's
    (red team 9)."""
    if not key:
        rng = random.Random(seed)
        return [rng.randrange(1, 2**31 - 1) for _ in range(trials)]
    seeds: dict[int, None] = {}
    index = 0
    while len(seeds) < trials:  # distinct: a repeat (about once in 2^31 pairs) is passed over
        digest = hashlib.blake2b(f"{int(seed)}:{index}".encode(), key=key.encode()[:64], digest_size=8).digest()
        seeds.setdefault(1 + int.from_bytes(digest, "big") % (2**31 - 2))
        index += 1
    return list(seeds)


# Elements of each output a timing check compares (all of a smaller output): what the judge compares is
# copied to host memory after a checked run, within the timed batch, so it is kept small; a run with a share f of its elements
# wrong passes with probability (1 - f)^TIMING_SAMPLE.
TIMING_SAMPLE = 4096


def sample_indices(numels: list[int], seed: int) -> list[torch.Tensor]:
    """Which elements of each output (flattened) a timing check compares: TIMING_SAMPLE of them drawn from
    `seed` on the CPU (the executor and the judge draw the same), or all of a smaller output."""
    generator = torch.Generator().manual_seed(int(seed))
    return [torch.arange(n) if n <= TIMING_SAMPLE else torch.randint(0, n, (TIMING_SAMPLE,), generator=generator)
            for n in numels]


def call_sample_seed(sample_seed: int, call: int) -> int:
    """The seed of the sample taken after call `call` (0-based) of a timed batch, a hash of the batch's secret
    (63 bits) and the call: an earlier call's indices (whose generator takes 32 bits of its seed) say nothing
    of a later call's."""
    digest = hashlib.blake2b(f"{int(sample_seed)}:{int(call)}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") >> 1


def to_device(value: Any, device: torch.device) -> Any:
    if isinstance(value, torch.Tensor):
        return value.to(device)
    if isinstance(value, (list, tuple)):
        return type(value)(to_device(v, device) for v in value)
    return value


def clone(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return value.clone()
    if isinstance(value, (list, tuple)):
        return type(value)(clone(v) for v in value)
    return value


def init_inputs(reference, seed: int, device: torch.device) -> list:
    """Constructor arguments, under the evaluation seed."""
    seed_everything(seed)
    with torch.device(device):
        return to_device(list(reference.get_init_inputs()), device)


def trial_inputs(reference, trial_seed: int, device: torch.device) -> list:
    """One trial's forward inputs under its own seed, created on `device` directly (fast, no host copy)."""
    seed_everything(trial_seed)
    with torch.device(device):
        return to_device(list(reference.get_inputs()), device)


def build_model(module, class_name: str, init_inputs: list, seed: int, device: torch.device) -> torch.nn.Module:
    seed_everything(seed)
    model = getattr(module, class_name)(*init_inputs)
    return model.to(device)


def flatten_outputs(value: Any) -> list[torch.Tensor]:
    """Forward outputs as a flat list of tensors (numbers become 0-d tensors); anything else is an error."""
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (list, tuple)):
        return [t for v in value for t in flatten_outputs(v)]
    if isinstance(value, (bool, int, float)):
        return [torch.tensor(value)]
    raise TypeError(f"forward returned a {type(value).__name__}; expected tensors")


def fingerprint(groups: list[list]) -> str:
    """A hash of every tensor's dtype, shape and a strided sample of its values (other values by repr)."""
    return finish_fingerprints([fingerprint_parts(groups)])[0]


def fingerprint_parts(groups: list[list]) -> list:
    """What `fingerprint` hashes, with each tensor's sample left on its device: keep these (small) instead
    of the tensors, and hash many at once with `finish_fingerprints` (one device-to-host copy, not one each:
    with many processes sharing a GPU every copy waits for the context's turn on it)."""
    parts: list = []
    for group in groups:
        for value in group:
            if isinstance(value, torch.Tensor):
                parts.append(f"{value.dtype}{tuple(value.shape)}".encode())
                flat = value.detach().reshape(-1)
                step = max(1, flat.numel() // 65536)
                sample = flat[::step]
                # a copy, never a view: a kept part must not keep a (possibly huge) tensor's storage alive
                parts.append(sample.to(torch.float64, copy=True) if not sample.is_complex()
                             else torch.view_as_real(sample).clone())
            else:
                parts.append(repr(value).encode())
    return parts


def finish_fingerprints(many_parts: list[list]) -> list[str]:
    """The fingerprints of several `fingerprint_parts` results."""
    samples = [p for parts in many_parts for p in parts if isinstance(p, torch.Tensor)]
    host: dict[int, bytes] = {}
    by_kind: dict[tuple, list[torch.Tensor]] = {}
    for sample in samples:
        by_kind.setdefault((sample.device, sample.dtype), []).append(sample)
    for batch in by_kind.values():
        flat = torch.cat([t.reshape(-1) for t in batch]).cpu().numpy()
        offset = 0
        for t in batch:
            host[id(t)] = flat[offset: offset + t.numel()].tobytes()
            offset += t.numel()
    digests = []
    for parts in many_parts:
        digest = hashlib.blake2b(digest_size=16)
        for part in parts:
            digest.update(host[id(part)] if isinstance(part, torch.Tensor) else part)
        digests.append(digest.hexdigest())
    return digests


def finish_fingerprint_grid(grid: list[list[list]]) -> list[list[str]]:
    """`finish_fingerprints` over rows of parts (input sets x trials), keeping the rows."""
    flat = finish_fingerprints([parts for row in grid for parts in row])
    rows, start = [], 0
    for row in grid:
        rows.append(flat[start: start + len(row)])
        start += len(row)
    return rows


def outputs_path(outputs_dir: str | Path, input_set: int, trial: int) -> Path:
    return Path(outputs_dir) / f"set_{input_set}_trial_{trial}.safetensors"


def save_outputs(tensors: list[torch.Tensor], path: Path) -> None:
    from safetensors.torch import save_file

    def host_copy(t: torch.Tensor) -> torch.Tensor:
        # A device tensor's .to("cpu") is already a fresh copy; a host tensor must be cloned so that no two
        # saved outputs share storage (safetensors refuses that) and the file holds this moment's values.
        t = t.detach()
        return t.contiguous().clone() if t.device.type == "cpu" else t.to("cpu").contiguous()

    save_file({str(i): host_copy(t) for i, t in enumerate(tensors)}, str(path))


def load_outputs(path: Path, device: torch.device) -> list[torch.Tensor]:
    from safetensors.torch import load_file

    loaded = load_file(str(path), device="cpu")
    return [loaded[str(i)].to(device) for i in range(len(loaded))]


def format_exception(exc: BaseException) -> str:
    return truncate("".join(traceback.format_exception(type(exc), exc, exc.__traceback__)))


_REFUSED = re.compile(r"Tried to allocate ([0-9.]+) (bytes|KiB|MiB|GiB|TiB)")
_UNITS = {"bytes": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40}


# What Triton's launcher raises when the driver refuses memory (loading a kernel's module at its first launch):
# its prefix and the driver's own name for CUDA_ERROR_OUT_OF_MEMORY, and nothing else.
TRITON_OUT_OF_MEMORY = "Triton Error [CUDA]: out of memory"


def out_of_memory(exc: BaseException) -> bool:
    """CUDA's out-of-memory, told by what raised it, never by words in a message (an operator's error can echo a
    string of the candidate's program: red team 10): torch's allocator refusing an allocation, or Triton's
    launcher reporting the driver's own refusal, whole."""
    return isinstance(exc, torch.cuda.OutOfMemoryError) or (
        type(exc) is RuntimeError and str(exc).strip() == TRITON_OUT_OF_MEMORY)


def refused_bytes(exc: BaseException) -> int | None:
    """The allocation torch's caching allocator refused ("Tried to allocate 6.00 GiB", rounded as it prints it);
    None when the error does not say (the driver's own)."""
    if not isinstance(exc, torch.cuda.OutOfMemoryError):
        return None
    found = _REFUSED.search(str(exc))
    return None if found is None else int(float(found.group(1)) * _UNITS[found.group(2)])
