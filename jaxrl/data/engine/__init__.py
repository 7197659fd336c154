"""The data engine: generated KernelBench-format tasks, teacher solutions, verification and splits.

Text work only (no torch, no jax): references are written as source text; running them goes through the
sandbox service.
"""
