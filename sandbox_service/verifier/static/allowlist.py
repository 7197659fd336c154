"""What a candidate may import and which attributes of those modules it may use: an allow-list.

Everything not listed is reported: an import as `foreign-import`, an attribute as `module-attribute`. A
module reached through another one (`torch.os`, `typing.sys`, `F.np`, `torch.importlib`) or a namespace
an honest kernel never needs (`torch.utils`, `torch.serialization`, `triton.knobs`) is no way around
the other rules. Names with a rule of their own (`gc`, `torch.compile`, `os.system`) are reported by
`catalog.DENY` before this list is consulted.

The list was drawn from what honest kernels use (the corpus, benchmarks/kernels, the examples, every
teacher template, Inductor-converted modules): tests/sandbox_service/verifier/test_static_allowlist.py.
"""

from __future__ import annotations

import dataclasses
import sys


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


@dataclasses.dataclass(frozen=True)
class Namespace:
    """The attributes of one module a candidate may use. A sub-namespace is allowed when it is itself a key
    of NAMESPACES; a listed name that is not one is a leaf (a function, class, dtype or value), whose own
    attributes only the dunder and frame rules look at."""

    names: frozenset[str] = frozenset()
    # Also every public name that is not a module: torch and triton.language have hundreds of operators,
    # and the compute rules, not this list, decide which of them may run in forward.
    open: bool = False


def _closed(names: str) -> Namespace:
    return Namespace(_words(names))


def _open(names: str = "") -> Namespace:
    return Namespace(_words(names), open=True)


# Names of modules that appear as attributes of the open namespaces (torch.utils, torch.nn.functional.np,
# triton.language.core, ...) or anywhere in the standard library (torch.os, collections.abc.sys): in an
# open namespace such a name is a module reached through another one, not an operator.
MODULE_NAMES = frozenset(sys.stdlib_module_names) | _words(
    """
    accelerator amp anomaly_mode ao attention autograd autotuner backends build cache classes common_types
    compiler core cpp cpu cuda cudnn cusparselt distributed distributions errors export extra fft forward_ad
    func function functional futures fx gds grad grad_mode graph graphs green_contexts hip hub init intrinsic
    jit jiterator kleidiai knobs language libdevice library linalg m masked memory mha miopen mkl mkldnn module
    modules monitor mps mtia nccl nested nn nnpack np numpy nvtx openmp ops opt_einsum optim overrides package
    parallel parameter profiler profiler_legacy profiler_util python_native qat quantizable quantization
    quantized quasirandom return_types runtime serialization sparse special standard storage streams
    target_info testing tl tools torch torch_version tunable utils version windows xpu
    """
)

_TYPING = """
    Any Optional Union List Dict Tuple Set FrozenSet Sequence MutableSequence Mapping MutableMapping Iterable
    Iterator Generator Callable Type TypeVar Generic Protocol Literal Final ClassVar NamedTuple TypedDict
    Annotated NoReturn Never Self TypeAlias ParamSpec Concatenate TypeVarTuple Unpack DefaultDict Deque
    Counter OrderedDict Hashable Sized SupportsInt SupportsFloat SupportsIndex cast overload final
    TYPE_CHECKING get_origin get_args runtime_checkable
"""

NAMESPACES: dict[str, Namespace] = {
    # --- torch: every public operator, class and dtype; sub-namespaces only as listed --------------------
    # chunk, select and trace are operators whose names are also standard-library modules.
    "torch": _open("chunk select trace"),
    "torch.nn": _open(),
    "torch.nn.functional": _open(),
    "torch.nn.init": _open("sparse"),
    "torch.nn.parameter": _closed("Parameter Buffer UninitializedParameter UninitializedBuffer"),
    "torch.linalg": _open(),
    "torch.fft": _open("fft"),
    "torch.special": _open(),
    "torch.autograd": _closed("Function Variable grad backward function no_grad enable_grad set_grad_enabled inference_mode"),
    "torch.autograd.function": _closed("Function FunctionCtx once_differentiable"),
    "torch.cuda": _closed(
        """
        is_available is_initialized synchronize current_device device_count set_device device get_device_name
        get_device_capability get_device_properties current_stream default_stream Event empty_cache mem_get_info
        memory_allocated max_memory_allocated memory_reserved reset_peak_memory_stats
        """
    ),
    # Flags are read here; writing them is monkeypatch or precision-downgrade.
    "torch.backends": _closed("cuda cudnn"),
    "torch.backends.cuda": _closed("matmul is_built"),
    "torch.backends.cudnn": _closed("allow_tf32 benchmark deterministic enabled is_available version"),
    "torch.ops": _closed("aten"),
    "torch.version": _closed("cuda hip git_version debug"),
    "torch.library": _closed("triton_op wrap_triton"),
    "torch.jit": _closed("is_scripting is_tracing"),
    "torch.testing": _closed("assert_close make_tensor"),
    # --- triton -----------------------------------------------------------------------------------------
    "triton": _closed("jit autotune heuristics Config cdiv next_power_of_2 language runtime testing CompilationError OutOfResources"),
    "triton.language": _open(),
    "triton.language.math": _open(),
    "triton.language.extra": _closed("libdevice cuda hip"),
    "triton.language.extra.libdevice": _open(),
    "triton.language.extra.cuda": _closed("libdevice"),
    "triton.language.extra.cuda.libdevice": _open(),
    "triton.language.extra.hip": _closed("libdevice"),
    "triton.language.extra.hip.libdevice": _open(),
    "triton.runtime": _closed("jit autotune heuristics Config driver autotuner"),
    "triton.runtime.jit": _closed("jit"),
    "triton.runtime.autotuner": _closed("autotune heuristics Config"),
    "triton.runtime.driver": _closed("active"),
    # The device's properties (SM count, target) for persistent kernels, as in Triton's tutorials.
    "triton.runtime.driver.active": _closed("get_current_target get_active_torch_device get_current_device utils"),
    "triton.runtime.driver.active.utils": _closed("get_device_properties"),
    "triton.testing": _closed("do_bench do_bench_cudagraph assert_close Benchmark perf_report"),
    # --- the standard library: pure helpers. Not logging (the evaluator's handlers and streams), not numpy,
    # einops or transformers (no honest kernel needs them; numpy.ctypeslib is ctypes) ---------------------
    "__future__": _closed("annotations division absolute_import print_function generator_stop"),
    "math": _open(),
    "typing": _closed(_TYPING),  # not get_type_hints: it evaluates string annotations
    "typing_extensions": _closed(_TYPING),
    "dataclasses": _closed("dataclass field fields asdict astuple replace is_dataclass InitVar MISSING KW_ONLY"),
    # not singledispatch: it evaluates string annotations
    "functools": _closed("partial partialmethod reduce lru_cache cache cached_property wraps update_wrapper total_ordering cmp_to_key"),
    "itertools": _open(),
    "collections": _closed("namedtuple deque defaultdict OrderedDict Counter ChainMap abc"),
    "collections.abc": _closed(
        """
        Awaitable Coroutine AsyncIterable AsyncIterator AsyncGenerator Hashable Iterable Iterator Generator
        Reversible Sized Container Callable Collection Set MutableSet Mapping MutableMapping MappingView KeysView
        ItemsView ValuesView Sequence MutableSequence
        """
    ),
    "enum": _closed("Enum IntEnum Flag IntFlag StrEnum auto unique"),
    "abc": _closed("ABC ABCMeta abstractmethod"),
    "numbers": _closed("Number Complex Real Rational Integral"),
    "operator": _open(),  # attrgetter and methodcaller are dynamic-getattr (catalog.DENY)
    "contextlib": _closed("contextmanager nullcontext suppress ExitStack"),
    "warnings": _closed("warn simplefilter filterwarnings catch_warnings"),
    "time": _closed("perf_counter perf_counter_ns time time_ns monotonic monotonic_ns sleep"),
    "os": _closed("environ getenv path cpu_count sep"),
    "os.environ": _closed("get copy keys items values"),
    "os.path": _open(),
    "sys": _closed("version_info version hexversion platform maxsize float_info byteorder"),
}

# Dunder attributes that are ordinary on any object (names, construction through super(), protocols of
# the candidate's own classes); every other dunder is dunder-access. Operator dunders (`__add__`) are
# the tensor rules' business.
ALLOWED_DUNDERS = _words(
    """
    __init__ __name__ __qualname__ __doc__ __module__ __version__ __call__ __len__ __iter__ __next__
    __getitem__ __setitem__ __contains__ __enter__ __exit__ __repr__ __str__ __hash__ __bool__ __post_init__
    __slots__ __annotations__
    """
)
# Private attributes of objects that are not the candidate's: a compiled kernel's `_init_handles()`, which
# Triton's fused-softmax tutorial calls to read its register count.
ALLOWED_PRIVATE = _words("_init_handles")
# Dunder names (not attributes) a module may use: `if __name__ == "__main__"`, a docstring, a method's __class__.
ALLOWED_DUNDER_NAMES = _words("__name__ __doc__ __debug__ __class__ __qualname__ __module__")


def is_dunder(name: str) -> bool:
    return len(name) > 4 and name.startswith("__") and name.endswith("__")


def import_allowed(module: str) -> bool:
    return module in NAMESPACES


def attribute_problem(path: str) -> str | None:
    """Why the qualified name `path` of an allowed module is not allowed, or None. Paths of modules that are
    not allowed were reported at their import; dunders are left to the dunder rules."""
    parts = path.split(".")
    prefix = parts[0]
    if prefix not in NAMESPACES:
        return None
    for name in parts[1:]:
        namespace = NAMESPACES.get(prefix)
        if namespace is None or is_dunder(name):
            return None  # past a leaf, or a dunder
        qualified = f"{prefix}.{name}"
        listed = name in namespace.names or qualified in NAMESPACES
        if not listed and not (namespace.open and not name.startswith("_") and name not in MODULE_NAMES):
            what = "a module reached through" if name in MODULE_NAMES else "a name outside the allow-list of"
            return f"uses {qualified}: {what} {prefix}"
        prefix = qualified
    return None
