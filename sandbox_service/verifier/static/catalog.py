"""What the static layer knows about the APIs a candidate can reach: glue vs compute, and what is dangerous.

Qualified names are dotted paths from the module that defines them ("torch.matmul",
"torch.nn.functional.relu", "os.system", "builtins.eval"): the analysis resolves every alias, import
and attribute chain to such a path before it looks anything up here.
"""

from __future__ import annotations

import fnmatch

from sandbox_service.verifier.static import allowlist


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


# --- torch.* functions that only allocate, view, re-lay out or describe tensors (glue) -----------------------
# Everything else called as torch.<lowercase name> counts as compute: torch has hundreds of compute
# functions, so compute is the default and glue is the list.
TORCH_ALLOC = _words(
    """
    empty empty_like empty_strided empty_permuted zeros zeros_like ones ones_like full full_like
    arange linspace logspace eye tensor as_tensor asarray from_numpy frombuffer scalar_tensor
    rand rand_like randn randn_like randint randint_like randperm tril_indices triu_indices
    """
)
# Glue that returns a view of its first argument (writing to the result writes the input).
TORCH_VIEWS = _words(
    """
    reshape flatten unflatten squeeze unsqueeze transpose swapaxes swapdims permute t adjoint narrow select
    chunk split tensor_split unbind hsplit vsplit dsplit movedim moveaxis as_strided broadcast_to
    broadcast_tensors view_as_real view_as_complex detach diagonal ravel atleast_1d atleast_2d atleast_3d
    """
)
# Glue that copies or moves data without computing on it.
TORCH_COPIES = _words(
    """
    clone cat concat concatenate stack hstack vstack dstack column_stack row_stack flip fliplr flipud roll
    tile repeat_interleave
    """
)
# Glue that returns Python values, dtypes, devices, contexts.
TORCH_META = _words(
    """
    numel is_tensor is_floating_point is_complex is_storage is_same_size is_nonzero is_grad_enabled
    is_inference_mode_enabled get_default_dtype get_default_device result_type promote_types can_cast finfo
    iinfo broadcast_shapes device no_grad enable_grad inference_mode set_grad_enabled get_num_threads
    typename get_float32_matmul_precision are_deterministic_algorithms_enabled compiled_with_cxx11_abi
    """
)
# torch sub-namespaces whose functions compute.
TORCH_COMPUTE_NAMESPACES = ("torch.linalg", "torch.fft", "torch.special", "torch.sparse", "torch.nested",
                            "torch.masked", "torch.distributions", "torch.signal", "torch.func")

# torch.nn.functional functions that only re-lay out memory.
FUNCTIONAL_GLUE = _words("pad")

# torch.nn classes that hold parameters or modules, or do not compute when called.
NN_NONCOMPUTE = _words(
    """
    Module Parameter Buffer ParameterList ParameterDict ModuleList ModuleDict Identity Flatten Unflatten
    UninitializedParameter UninitializedBuffer
    """
)
NN_CONTAINERS = _words("ModuleList ModuleDict ParameterList ParameterDict Sequential")
# Attributes of torch.nn layer instances that are configuration, not tensors.
NN_CONFIG_ATTRS = _words(
    """
    in_features out_features in_channels out_channels kernel_size stride padding dilation groups
    padding_mode output_padding eps momentum affine track_running_stats num_features normalized_shape
    elementwise_affine num_groups negative_slope inplace p dim training approximate beta threshold
    min_val max_val lambd upper lower embedding_dim num_embeddings hidden_size num_layers
    """
)

# --- tensor methods ----------------------------------------------------------------------------------------
TENSOR_SCALAR_METHODS = _words(
    """
    size stride numel dim ndimension nelement element_size item storage_offset is_contiguous
    is_floating_point is_complex is_signed get_device dim_order is_pinned is_shared
    """
)
TENSOR_SCALAR_ATTRS = _words(
    """
    shape dtype device ndim is_cuda is_cpu is_meta layout requires_grad itemsize nbytes is_leaf is_sparse
    is_quantized names
    """
)
TENSOR_TENSOR_ATTRS = _words("T mT H mH data real imag grad")
TENSOR_VIEW_METHODS = _words(
    """
    view view_as reshape reshape_as flatten unflatten squeeze unsqueeze transpose permute t expand expand_as
    narrow select as_strided detach contiguous unfold split chunk unbind tensor_split movedim moveaxis
    swapaxes swapdims diagonal getitem hsplit vsplit ravel
    """
)
TENSOR_GLUE_METHODS = _words(
    """
    clone to float double int long short bool byte char cpu cuda type new_empty new_empty_strided new_zeros
    new_ones new_full new_tensor pin_memory repeat tile flip roll fill_ zero_ copy_ requires_grad_
    retain_grad share_memory_ untyped_storage storage cdouble cfloat record_stream half bfloat16
    """
)
# In-place methods that do not mutate data.
TENSOR_INPLACE_HARMLESS = _words("requires_grad_ retain_grad share_memory_")
# Methods that on an unknown receiver almost certainly belong to a tensor (they are flagged even when
# the receiver's type is not known). Generic names (sum, max, add, sort) need a known tensor.
TENSOR_SPECIFIC_COMPUTE = _words(
    """
    matmul mm bmm baddbmm addmm addbmm addmv addcmul addcdiv softmax log_softmax relu sigmoid tanh exp exp2
    expm1 log1p rsqrt sqrt cumsum cumprod logsumexp amax amin argmax argmin masked_fill clamp clamp_min
    clamp_max erf gelu logaddexp lerp hardshrink reciprocal einsum conv1d conv2d conv3d layer_norm
    tril triu sgn relu6 silu mish softplus numpy tolist
    """
)
# Python operator dunders and the tensor method they dispatch to.
DUNDER_OPERATORS = {
    "add": "add", "radd": "add", "iadd": "add_", "sub": "sub", "rsub": "sub", "isub": "sub_",
    "mul": "mul", "rmul": "mul", "imul": "mul_", "truediv": "div", "rtruediv": "div", "itruediv": "div_",
    "floordiv": "floor_divide", "rfloordiv": "floor_divide", "mod": "remainder", "rmod": "remainder",
    "pow": "pow", "rpow": "pow", "ipow": "pow_", "matmul": "matmul", "rmatmul": "matmul", "imatmul": "matmul",
    "neg": "neg", "pos": "positive", "abs": "abs", "invert": "bitwise_not", "and": "bitwise_and",
    "or": "bitwise_or", "xor": "bitwise_xor", "lshift": "bitwise_left_shift", "rshift": "bitwise_right_shift",
    "eq": "eq", "ne": "ne", "lt": "lt", "le": "le", "gt": "gt", "ge": "ge", "getitem": "getitem",
    "setitem": "setitem_", "len": "size", "contains": "contains",
}
# operator.* functions that apply a Python operator.
OPERATOR_FUNCTIONS = _words(
    """
    add sub mul truediv floordiv mod pow matmul neg pos abs invert and_ or_ xor lshift rshift eq ne lt le gt ge
    iadd isub imul itruediv ifloordiv imod ipow imatmul iand ior ixor
    """
)
# Python builtins that apply operators to their arguments.
OPERATOR_BUILTINS = _words("sum abs pow round divmod max min")

LOW_PRECISION_DTYPES = _words(
    """
    torch.float16 torch.half torch.bfloat16 torch.float8_e4m3fn torch.float8_e5m2 torch.float8_e4m3fnuz
    torch.float8_e5m2fnuz torch.float8_e8m0fnu torch.HalfTensor torch.BFloat16Tensor torch.cuda.HalfTensor
    torch.cuda.BFloat16Tensor
    """
)
LOW_PRECISION_STRINGS = _words("float16 half bfloat16 torch.float16 torch.half torch.bfloat16 torch.HalfTensor torch.cuda.HalfTensor")
LOW_PRECISION_METHODS = _words("half bfloat16")

# Decorators (or wrapping calls) that turn a function into a Triton kernel.
TRITON_KERNEL_DECORATORS = _words(
    """
    triton.jit triton.autotune triton.heuristics triton.runtime.jit triton.runtime.autotune
    triton.runtime.heuristics triton.runtime.jit.jit triton.runtime.autotuner.autotune
    triton.runtime.autotuner.heuristics triton.language.jit
    """
)
TRITON_SCALAR_FUNCTIONS = _words("triton.cdiv triton.next_power_of_2 triton.language.cdiv")
# torch's own ways to launch a Triton kernel (torch.compile-compatible): the kernel passes through.
TORCH_TRITON_LAUNCHERS = _words("torch.library.wrap_triton")
CACHE_DECORATORS = _words("functools.lru_cache functools.cache")

# The names KernelBench problems use to generate the evaluation's inputs.
INPUT_GENERATORS = _words("get_inputs get_init_inputs")

# --- modules ---------------------------------------------------------------------------------------------
# Known homes of other people's kernels or of the evaluation itself: a more specific message.
KNOWN_FOREIGN = {
    "sandbox_service": "the evaluator", "tritonrl": "the evaluator", "jaxrl": "the trainer",
    "kernelbench": "the KernelBench evaluator", "src": "the KernelBench evaluator", "__main__": "the evaluator's main module",
    "pytest": "the test runner", "conftest": "the test runner",
    "flash_attn": "a kernel library", "xformers": "a kernel library", "apex": "a kernel library",
    "transformer_engine": "a kernel library", "liger_kernel": "a kernel library", "flashinfer": "a kernel library",
    "vllm": "a kernel library", "sglang": "a kernel library", "sgl_kernel": "a kernel library",
    "bitsandbytes": "a kernel library", "fbgemm_gpu": "a kernel library", "torchao": "a kernel library",
    "deepspeed": "a kernel library", "unsloth": "a kernel library", "kernels": "a kernel hub loader",
    "cupy": "a GPU array library", "numba": "a JIT compiler", "jax": "another array framework",
    "tensorflow": "another array framework", "tilelang": "a kernel DSL", "tvm": "a kernel compiler",
    "cutlass": "a kernel library", "pycuda": "a CUDA binding", "cuda": "a CUDA binding", "torchvision": "a model/op library",
    "scipy": "a numerical library",
}

# Dangerous qualified names, checked in order; the first match wins. A pattern matches a path equal to
# it, a path below it ("subprocess" matches "subprocess.run"), or an fnmatch glob ("os.exec*").
DENY: list[tuple[str, str, str]] = []


def _deny(rule: str, reason: str, patterns: str) -> None:
    DENY.extend((pattern, rule, reason) for pattern in patterns.split())


_deny("tensor-subclass", "builds tensor subclasses or dispatch modes", """
    torch.Tensor._make_subclass torch.Tensor._make_wrapper_subclass torch.Tensor.as_subclass torch._C._TensorBase
    torch._C.TensorBase torch.utils._python_dispatch torch.overrides torch._subclasses torch.utils._mode_utils
    torch.Tensor.__torch_function__ torch.Tensor.__torch_dispatch__
""")
_deny("torch-compiler", "hands the work to a PyTorch compiler or code generator", """
    torch.compile torch.compiler torch._dynamo torch._inductor torch.jit.script torch.jit.trace torch.jit.trace_module
    torch.jit.fork torch.jit.wait torch.jit.load torch.jit.freeze torch.jit.optimize_for_inference
    torch.jit.ScriptModule torch.jit.ScriptFunction torch.jit.CompilationUnit torch.fx torch.export
    torch.utils.cpp_extension torch.library.custom_op torch.library.Library torch.library.define torch.library.impl
    torch.library.register_* torch.library.opcheck torch._higher_order_ops torch._prims torch._refs torch._decomp
    torch.cuda.jiterator torch.package *.extern_kernels extern_kernels torch.vmap torch.CompilationUnit torch.Script*
    torch.LiteScriptModule torch.import_ir_module* torch.parse_ir torch.fork torch.wait
""")
_deny("foreign-import", "uses another library's kernels or remote code", "triton.ops torch.hub torch.utils.model_zoo")
_deny("side-stream", "runs work on another CUDA stream", """
    torch.cuda.Stream torch.cuda.stream torch.cuda.streams torch.cuda.ExternalStream torch.cuda.set_stream
    torch.cuda.StreamContext torch.Stream torch.cuda.graphs.graph_pool_handle torch.xpu.Stream
""")
_deny("precision-downgrade", "changes numeric precision", """
    torch.set_float32_matmul_precision torch.set_default_dtype torch.set_default_tensor_type torch.autocast
    torch.cuda.amp torch.amp torch.cpu.amp torch.set_flush_denormal torch.set_autocast_*
""")
_deny("forward-rebinding", "installs module hooks that replace outputs", """
    torch.nn.modules.module.register_module_forward_hook torch.nn.modules.module.register_module_forward_pre_hook
    torch.nn.modules.module.register_module_full_backward_hook torch.nn.Module.register_forward_hook
    torch.nn.Module.register_forward_pre_hook
""")
_deny("concurrency", "runs code on other threads or processes", """
    threading _thread multiprocessing concurrent asyncio torch.multiprocessing torch.futures sched joblib
""")
_deny("identity-cache", "keeps references keyed by object identity", "weakref")
_deny("module-attribute", "returns a module object by name", "torch.get_device_module")
_deny("dynamic-code", "builds or loads code at run time", """
    builtins.eval builtins.exec builtins.compile builtins.__import__ importlib imp runpy code codeop marshal
    pickle _pickle cPickle dill cloudpickle types.FunctionType types.CodeType types.MethodType
    types.LambdaType zipimport pkgutil
""")
_deny("dynamic-getattr", "reads attributes by computed name", "operator.attrgetter operator.methodcaller")
_deny("dynamic-code", "evaluates string annotations as code", "typing.get_type_hints typing_extensions.get_type_hints functools.singledispatch*")
_deny("frame-introspection", "inspects frames or the interpreter's state", """
    gc inspect traceback tracemalloc sys.modules sys._getframe sys._current_frames sys.settrace sys.setprofile
    sys.gettrace sys.getprofile sys.meta_path sys.path_hooks sys.path_importer_cache sys.path sys.getrefcount
    sys.exc_info sys.last_traceback builtins.globals builtins.locals builtins.vars builtins.dir builtins.help types.FrameType
    types.TracebackType dis
""")
_deny("os-escape", "starts processes, loads native code, opens sockets or stops the interpreter", """
    subprocess os.system os.popen os.exec* os.spawn* os.posix_spawn* os.fork* os.kill* os._exit os.abort
    os.startfile os.putenv os.unsetenv os.set* os.chdir os.chroot os.nice os.plock os.wait* posix nt
    ctypes cffi _ctypes socket ssl http urllib urllib3 requests httpx aiohttp ftplib smtplib telnetlib
    xmlrpc socketserver websocket websockets paramiko signal resource atexit faulthandler pty fcntl termios
    mmap sys.exit sys.addaudithook torch.ops.load_library torch.cuda.caching_allocator_alloc torch.cuda.caching_allocator_delete
    torch.cuda.memory.caching_allocator_alloc torch.cuda.memory.caching_allocator_delete builtins.exit builtins.quit builtins.breakpoint
    builtins.input pdb webbrowser pip ensurepip venv distutils setuptools
""")
_deny("file-io", "reads or writes files", """
    builtins.open io.open io.FileIO io.open_code codecs.open os.open os.read os.write os.remove os.unlink os.rmdir
    os.removedirs os.rename os.renames os.replace os.mkdir os.makedirs os.listdir os.scandir os.walk
    os.fdopen os.truncate os.link os.symlink os.chmod os.chown os.utime os.mkfifo os.sendfile shutil tempfile
    pathlib glob fileinput linecache sqlite3 dbm shelve zipfile tarfile json.load json.dump torch.save
    torch.load torch.from_file torch.*Storage.from_file torch.PyTorchFileReader torch.PyTorchFileWriter numpy.save numpy.savez numpy.savez_compressed numpy.load numpy.loadtxt numpy.savetxt
    numpy.genfromtxt numpy.fromfile numpy.memmap safetensors h5py
""")
_deny("monkeypatch", "changes the evaluator's environment or torch's global settings", """
    os.environ.update os.environ.setdefault os.environ.pop os.environ.clear os.environ.popitem
    os.environ.__setitem__ os.environ.__delitem__ torch.set_num_threads torch.set_num_interop_threads
    torch.set_default_device torch.use_deterministic_algorithms torch.set_deterministic_debug_mode
    torch.cuda.set_per_process_memory_fraction torch.cuda.memory.set_per_process_memory_fraction
    torch.cuda.set_sync_debug_mode
""")

# Names of the random-number state; flagged in forward and __init__ (reseeding makes inputs predictable).
RNG_STATE = """
    torch.manual_seed torch.seed torch.set_rng_state torch.get_rng_state torch.initial_seed torch.random
    torch.cuda.manual_seed torch.cuda.manual_seed_all torch.cuda.seed torch.cuda.seed_all torch.cuda.set_rng_state
    torch.cuda.set_rng_state_all torch.cuda.get_rng_state torch.cuda.get_rng_state_all torch.cuda.random
    torch.Generator torch.default_generator numpy.random.seed numpy.random.set_state numpy.random.get_state
    numpy.random.default_rng numpy.random.RandomState random.seed random.setstate random.getstate random.Random
""".split()

# Attribute names that reach a frame, code object, closure cell or traceback, on any object (CPython's full set).
FRAME_ATTRS = _words(
    """
    f_back f_builtins f_code f_globals f_lasti f_lineno f_locals f_trace f_trace_lines f_trace_opcodes
    gi_code gi_frame gi_running gi_suspended gi_yieldfrom cr_await cr_code cr_frame cr_origin cr_running
    cr_suspended ag_await ag_code ag_frame ag_running tb_frame tb_lasti tb_lineno tb_next cell_contents
    co_argcount co_cellvars co_code co_consts co_exceptiontable co_filename co_firstlineno co_flags
    co_freevars co_kwonlyargcount co_lines co_linetable co_lnotab co_name co_names co_nlocals co_positions
    co_posonlyargcount co_qualname co_stacksize co_varnames
    """
)
# Dunder attributes used for sandbox escapes: flagged on any object (every dunder not in
# allowlist.ALLOWED_DUNDERS is too; these are named in the message).
ESCAPE_DUNDERS = _words(
    """
    __globals__ __subclasses__ __builtins__ __code__ __closure__ __bases__ __base__ __mro__ __reduce__
    __reduce_ex__ __loader__ __spec__ __self__ __func__ __wrapped__ __defaults__ __kwdefaults__
    __subclasshook__ __init_subclass__ __objclass__
    """
)
# Dunders that are ordinary on one's own object (self, super()) and an escape on anything else.
SELF_ONLY_DUNDERS = _words("__dict__ __setattr__ __delattr__ __getattribute__")
# nn.Module's hook tables: writing them installs hooks without register_*_hook.
HOOK_ATTRS = _words(
    """
    _forward_hooks _forward_pre_hooks _forward_hooks_with_kwargs _forward_pre_hooks_with_kwargs
    _forward_hooks_always_called _global_forward_hooks _global_forward_pre_hooks _call_impl _wrapped_call_impl
    """
)
TENSOR_PROTOCOL_METHODS = _words("__torch_function__ __torch_dispatch__")


def deny_match(path: str) -> tuple[str, str] | None:
    """(rule, reason) for a dangerous qualified name, or None."""
    for pattern, rule, reason in DENY:
        if _matches(path, pattern):
            return rule, reason
    if path.startswith("torch.") and any(part.startswith("_") and not part.startswith("__") for part in path.split(".")[1:]):
        return "torch-private-api", "reaches torch internals"
    return None


def rng_match(path: str) -> bool:
    return any(_matches(path, pattern) for pattern in RNG_STATE)


def _matches(path: str, pattern: str) -> bool:
    if any(ch in pattern for ch in "*?["):
        if fnmatch.fnmatchcase(path, pattern):
            return True
        # A glob also covers what lies below a match ("os.exec*" covers "os.execv.something").
        parts = path.split(".")
        return any(fnmatch.fnmatchcase(".".join(parts[:i]), pattern) for i in range(1, len(parts)))
    return path == pattern or path.startswith(pattern + ".")


def import_problem(module: str) -> str | None:
    """Why importing `module` is not allowed, or None (modules with a rule of their own are left to DENY)."""
    top = module.split(".")[0]
    if top in KNOWN_FOREIGN:
        return f"imports {module}: {KNOWN_FOREIGN[top]}"
    if deny_match(module) or allowlist.import_allowed(module):
        return None
    return f"imports {module}, which is not on the allow-list of modules (torch, triton and a few pure standard-library ones)"


def normalise_nn_path(path: str) -> str:
    """`torch.nn.modules.linear.Linear` and `torch.nn.parameter.Parameter` are `torch.nn.Linear` and `torch.nn.Parameter`."""
    parts = path.split(".")
    if len(parts) >= 4 and parts[:3] == ["torch", "nn", "modules"]:
        return "torch.nn." + ".".join(parts[4:]) if len(parts) > 4 else path
    if len(parts) >= 4 and parts[:3] == ["torch", "nn", "parameter"]:
        return "torch.nn." + ".".join(parts[3:])
    return path
