"""The Triton teacher: a correct, idiomatic solution for any Program, written by construction."""

from jaxrl.data.engine.teacher.module import UNTEMPLATED_OPS, NoTemplate, write_solution

__all__ = ["UNTEMPLATED_OPS", "NoTemplate", "write_solution"]
