"""Trusted code parses Python one source at a time (sandbox_service.ast_parse): CPython keeps the AST constructor's
recursion depth per interpreter, and two server threads parsing at once made an honest program read as malformed."""

from __future__ import annotations

import ast

import pytest

from sandbox_service import ast_parse
from sandbox_service.interface import program
from sandbox_service.options import CandidateFormat
from sandbox_service.verifier import format as format_layer


@pytest.fixture
def parses_under_the_lock(monkeypatch) -> list[bool]:
    held: list[bool] = []
    real = ast.parse

    def parse(source, *args, **kwargs):
        held.append(ast_parse._LOCK.locked())
        return real(source, *args, **kwargs)

    monkeypatch.setattr(ast, "parse", parse)
    return held


def test_a_program_s_kernels_are_parsed_one_at_a_time(parses_under_the_lock):
    program.kernel_parameters.cache_clear()
    assert program.kernel_parameters("def k(x_ptr, n, BLOCK: tl.constexpr):\n    pass\n") == ("x_ptr", "n", "BLOCK")
    assert parses_under_the_lock == [True]


def test_the_format_layer_parses_one_source_at_a_time(parses_under_the_lock):
    format_layer.check_format("import torch\n\nclass ModelNew(torch.nn.Module):\n    pass\n", CandidateFormat.CODE, 1 << 20)
    assert parses_under_the_lock and all(parses_under_the_lock)
