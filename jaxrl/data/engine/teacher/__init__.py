"""The Triton teacher: a correct, idiomatic solution for any Program, written by construction."""

from jaxrl.data.engine.teacher.module import write_solution

__all__ = ["write_solution"]
