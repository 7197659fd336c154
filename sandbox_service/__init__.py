"""Kernel sandbox: evaluates candidate Triton `ModelNew` modules against PyTorch references, hardened
against reward hacking. See docs/sandbox.md."""

__version__ = "0.1.0"
