"""The converter: Inductor's wrapper text (recorded on the CPU with torch 2.13 and on an H100 with torch 2.11,
`capture_fixtures.py`) becomes a standalone ModelNew that needs nothing of Inductor's runtime."""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import pytest

from sandbox_service.inductor.convert import (
    GraphArgument, GraphCapture, ConversionError, _argument_expression, block_sizes, convert, _kernel,
)
from sandbox_service.inductor.helpers import helper_sources
from sandbox_service.options import EvalOptions, Policy
from sandbox_service.verifier.format import check_format
from sandbox_service.verifier.static_rules import check_static

FIXTURES = Path(__file__).resolve().parent / "fixtures"
CAPTURES = sorted((FIXTURES / "captures").glob("*.json"))
STANDALONE = [p for p in CAPTURES if not p.name.startswith("linear_relu")]


def load(path: Path) -> tuple[str, GraphCapture, str]:
    """(reference source, capture, device) of a recorded capture."""
    record = json.loads(path.read_text())
    capture = GraphCapture(record["wrapper"], tuple(GraphArgument(**a) for a in record["arguments"]),
                           record["outputs"], record["returns_tuple"])
    return (FIXTURES / f"{path.name.split('.')[0]}.py").read_text(), capture, record["device"]


def functions(source: str) -> dict[str, ast.FunctionDef]:
    return {n.name: n for n in ast.parse(source).body if isinstance(n, ast.FunctionDef)}


def classes(source: str) -> dict[str, ast.ClassDef]:
    return {n.name: n for n in ast.parse(source).body if isinstance(n, ast.ClassDef)}


def test_the_fixtures_cover_both_machines():
    assert {load(p)[2] for p in STANDALONE} == {"cpu", "cuda"} and len(STANDALONE) == 8 and len(LIBDEVICE) >= 2


@pytest.mark.parametrize("path", STANDALONE, ids=lambda p: p.stem)
def test_a_converted_module_stands_alone_and_passes_the_format_and_strict_static_layers(path):
    reference, capture, _ = load(path)
    module = convert(reference, capture)
    for runtime in ("torch._inductor", "triton_heuristics", "triton_helpers", "async_compile", "extern_kernels",
                    "empty_strided_cuda", "reinterpret_tensor", "assert_size_stride", ".run("):
        assert runtime not in module.source, runtime
    jit = [f for f in functions(module.source).values() if f.decorator_list]
    assert jit and all([ast.unparse(d) for d in f.decorator_list] == ["triton.jit"] for f in jit)
    assert module.kernels == capture.wrapper.count("async_compile.triton(")
    model, model_new = classes(reference)["Model"], classes(module.source)["ModelNew"]
    methods = {n.name: n for n in model_new.body if isinstance(n, ast.FunctionDef)}
    assert ast.unparse(methods["forward"].args) == ast.unparse(
        next(n for n in model.body if isinstance(n, ast.FunctionDef) and n.name == "forward").args)
    options = EvalOptions()
    assert not check_format(module.source, options.candidate_format, options.max_source_bytes).violations
    assert check_static(module.source, Policy.STRICT, reference) == []


LIBDEVICE = [p for p in STANDALONE if ".cuda-" in p.name and re.search(r"libdevice\.\w+\(", p.read_text())]


@pytest.mark.parametrize("path", LIBDEVICE, ids=lambda p: p.stem)
def test_gpu_modules_keep_libdevice_and_portable_ones_replace_it(path):
    reference, capture, _ = load(path)
    assert "from triton.language.extra import libdevice" in convert(reference, capture).source
    portable = convert(reference, capture, portable=True).source
    assert "libdevice" not in portable.replace("helper_libdevice_", "")


def test_a_float_attribute_inductor_reads_with_item_is_passed_as_the_number_itself():
    reference, capture, _ = load(FIXTURES / "captures" / "norm_two_outputs.cpu-torch2.13.0.json")
    assert [a.kind for a in capture.arguments].count("wrapped_number") == 1
    source = convert(reference, capture).source
    assert ".item()" not in source.split("def launch_kernels", 1)[1]
    forward = source.split("def forward", 1)[1]
    assert "self.norm.weight, self.norm.bias, x.size()[0], x, self.scale, y" in forward
    assert "return (outputs[0], outputs[1])" in forward


def test_a_tiled_kernel_spreads_rows_past_the_grid_limit_over_the_third_axis():
    reference, capture, _ = load(FIXTURES / "captures" / "transpose_copy.cuda-torch2.11.0.json")
    launch = functions(convert(reference, capture).source)["launch_kernels"]
    text = ast.unparse(launch)
    assert "min(triton.cdiv(" in text and ", 65535), triton.cdiv(triton.cdiv(" in text


def test_helper_functions_inductor_writes_beside_a_kernel_are_renamed_per_kernel():
    reference, capture, _ = load(FIXTURES / "captures" / "running_logsumexp.cpu-torch2.13.0.json")
    names = functions(convert(reference, capture).source)
    combiners = [n for n in names if n.startswith("_triton_helper_fn")]
    assert combiners and all(n.endswith("_k0") for n in combiners)


@pytest.mark.parametrize("path", [p for p in CAPTURES if p.name.startswith("linear_relu")], ids=lambda p: p.stem)
def test_a_matmul_is_refused_because_inductor_calls_an_extern_kernel_for_it(path):
    reference, capture, _ = load(path)
    with pytest.raises(ConversionError, match="extern_kernels|no Triton kernel"):
        convert(reference, capture)


def test_a_runtime_helper_without_a_standalone_version_is_refused_by_name():
    reference, capture, _ = load(FIXTURES / "captures" / "norm_two_outputs.cpu-torch2.13.0.json")
    broken = GraphCapture(capture.wrapper.replace("triton_helpers.maximum", "triton_helpers.bucketize_binary_search"),
                          capture.arguments, capture.outputs, capture.returns_tuple)
    with pytest.raises(ConversionError, match="triton_helpers.bucketize_binary_search"):
        convert(reference, broken)


def test_a_call_that_does_not_take_the_captured_arguments_is_refused():
    reference, capture, _ = load(FIXTURES / "captures" / "transpose_copy.cpu-torch2.13.0.json")
    with pytest.raises(ConversionError, match="takes 3 arguments, the graph has 2"):
        convert(reference, GraphCapture(capture.wrapper, capture.arguments[1:], 1, False))


@pytest.mark.parametrize("source, expected", [
    ("L['x']", "x"),
    ("L['x'].size()[1]", "x.size()[1]"),
    ("L['self']._modules['fc']._parameters['weight']", "self.fc.weight"),
    ("L['self']._modules['net']._modules['0']._buffers['running_mean']", "getattr(self.net, '0').running_mean"),
    ("L['self'].scale", "self.scale"),
])
def test_graph_inputs_are_read_from_forwards_arguments(source, expected):
    assert _argument_expression(source, {"self": "self", "x": "x"}) == expected


@pytest.mark.parametrize("source", ["G['weights']", "L['z']", "L['x'].view(4)[0]"])
def test_graph_inputs_that_forward_cannot_reach_are_refused(source):
    with pytest.raises(ConversionError):
        _argument_expression(source, {"self": "self", "x": "x"})


def test_block_sizes_follow_the_kernel_kind():
    reference, capture, _ = load(FIXTURES / "captures" / "variance_argmax.cuda-torch2.11.0.json")
    wrapper = ast.parse(capture.wrapper)
    call = next(n for n in wrapper.body if isinstance(n, ast.Assign) and "async_compile.triton" in ast.unparse(n.value))
    kernel = _kernel(call.targets[0].id, call.value.args[1].value, 0, portable=False)
    blocks, warps = block_sizes(kernel)
    assert set(blocks) == set(kernel.constexprs) and all(v >= 1 and v & (v - 1) == 0 for v in blocks.values())
    assert warps in (4, 8)


def test_helpers_come_with_the_helpers_they_call_defined_first():
    text = helper_sources({"max_with_index", "welford"})
    order = [n.name for n in ast.parse(text).body]
    assert order.index("helper_is_floating") < order.index("helper_maximum_with_index") < order.index(
        "helper_max_with_index")
    assert order.index("helper_welford_combine") < order.index("helper_welford")
    with pytest.raises(KeyError):
        helper_sources({"no_such_helper"})
