"""Compile a reference with TorchInductor and keep what it wrote (runs in a sandbox child: imports torch).

The model is compiled whole (`fullgraph`), for inference, with dynamic shapes (the module must work on
every input set, not only the shapes it was compiled for). A dynamo backend records the graph's inputs
(where each comes from) before handing the graph to Inductor; Inductor writes its wrapper module into a
private cache folder, which is read back as text. Nothing Inductor made is run here.

Inductor's kernels are never compiled here: loading its module gets a placeholder for each (on the CPU,
where Inductor writes Triton for the CPU device with `cpu_backend="triton"`, Triton could not compile them
anyway; on a GPU it would spend seconds a kernel autotuning), and the first call of the compiled model
stops at the first launch, after the text was written. On the CPU Inductor also asks Triton for the
active backend to key its caches, and this Triton has none: the key is given a fixed value here.
"""

from __future__ import annotations

import os
from pathlib import Path

import torch
import torch._dynamo

from sandbox_service.inductor.convert import NUMBER, TENSOR, WRAPPED_NUMBER, GraphArgument, GraphCapture
from sandbox_service.worker import harness


class CaptureError(RuntimeError):
    """Inductor produced no usable module for the reference; says why."""


def configure(device: torch.device, cache_dir: Path) -> None:
    """Inductor settings for one capture: private caches, no worker pool, no CUDA graphs or partitions,
    no size variable shared between dimensions."""
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = str(cache_dir)
    import torch._inductor.config as inductor_config

    settings = {"compile_threads": 1, "fx_graph_cache": False, "fx_graph_remote_cache": False,
                "autotune_local_cache": False, "freezing": False, "cpp_wrapper": False, "max_autotune": False,
                "graph_partition": False, "cpu_backend": "triton"}
    for key, value in settings.items():
        if hasattr(inductor_config, key):
            setattr(inductor_config, key, value)
    if hasattr(inductor_config, "triton") and hasattr(inductor_config.triton, "cudagraphs"):
        inductor_config.triton.cudagraphs = False
    import torch.fx.experimental._config as shape_config

    # every dimension its own size variable: sizes equal in the example may differ in another input set
    if hasattr(shape_config, "use_duck_shape"):
        shape_config.use_duck_shape = False
    if device.type == "cpu":
        _fix_cpu_backend_key()
    _skip_kernel_compilation()


class _NotCompiled:
    """Stands for a kernel of Inductor's module: only its text is wanted, so none is compiled or run."""

    def __init__(self, name: str):
        self.name = name

    def run(self, *args, **kwargs):
        raise CaptureError(f"kernel {self.name} was not compiled: the capture keeps Inductor's text only")


def _skip_kernel_compilation() -> None:
    """Loading Inductor's module compiles every kernel, autotuning configs and all (seconds each on a GPU,
    impossible on the CPU): the capture needs none of it, so the module gets placeholders instead."""
    from torch._inductor.async_compile import AsyncCompile

    AsyncCompile.triton = lambda self, kernel_name, source_code, device_str="cuda", **kwargs: _NotCompiled(kernel_name)


def _fix_cpu_backend_key() -> None:
    import torch.utils._triton as torch_triton
    from triton.backends.compiler import GPUTarget

    torch_triton.triton_backend = lambda: GPUTarget("cpu", 0, 0)
    torch_triton.triton_hash_with_backend = lambda: "tritonrl-cpu-capture"


def _source_name(source) -> str:
    name = source.name
    return name() if callable(name) else str(name)


def capture(module, device: torch.device, seed: int, cache_dir: Path) -> GraphCapture:
    configure(device, cache_dir)
    init = harness.init_inputs(module, seed, device)
    model = harness.build_model(module, "Model", init, seed, device).eval()
    inputs = harness.trial_inputs(module, harness.trial_seeds(seed, 1)[0], device)
    with torch.no_grad():
        eager = model(*inputs)
    eager_outputs = harness.flatten_outputs(eager)
    graphs: list[tuple[list[GraphArgument], int, list[Path]]] = []  # arguments, outputs, wrappers written

    def record(gm, example_inputs):
        from torch._inductor.compile_fx import compile_fx

        arguments = []
        for node in gm.graph.nodes:
            if node.op != "placeholder":
                continue
            graph_arg = node.meta.get("grapharg")
            if graph_arg is None:
                raise CaptureError(f"graph input {node.name} has no source")
            if getattr(graph_arg, "pass_arg_as_tensor", False):
                kind = WRAPPED_NUMBER
            else:
                kind = TENSOR if isinstance(node.meta.get("example_value"), torch.Tensor) else NUMBER
            arguments.append(GraphArgument(_source_name(graph_arg.source), kind))
        outputs = gm.graph.output_node().args[0]
        before = _wrappers(cache_dir)
        try:
            return compile_fx(gm, example_inputs)
        finally:
            written = sorted(set(_wrappers(cache_dir)) - set(before))
            graphs.append((arguments, len(outputs) if isinstance(outputs, (tuple, list)) else 1, written))

    torch._dynamo.reset()
    compiled = torch.compile(model, backend=record, dynamic=True, fullgraph=True)
    error = None
    try:
        with torch.no_grad():
            compiled(*inputs)
    except Exception as exc:  # noqa: BLE001 - the first launch stops it (see _NotCompiled), after the text was written
        error = exc
    # dynamo may compile again after a failed attempt (a float it could not keep symbolic becomes a constant):
    # the last graph is the one that stands
    if not graphs or not graphs[-1][2]:
        reason = harness.format_exception(error).strip().splitlines()[-1] if error else "no graph was compiled"
        raise CaptureError(f"Inductor did not compile the model: {reason[:600]}")
    arguments, outputs, written = graphs[-1]
    if len(written) > 1:
        raise CaptureError(f"the model compiled to {len(written)} graphs, not one")
    if outputs != len(eager_outputs):
        raise CaptureError(f"the graph computes {outputs} outputs, forward returns {len(eager_outputs)}")
    return GraphCapture(wrapper=written[0].read_text(), arguments=tuple(arguments), outputs=outputs,
                        returns_tuple=isinstance(eager, (tuple, list)))


def _wrappers(cache_dir: Path) -> list[Path]:
    """Inductor's wrapper modules in its cache (kernel files have no `call`)."""
    return [p for p in sorted(cache_dir.rglob("*.py")) if "def call(" in p.read_text(errors="replace")]
