"""Evaluation: KernelBench metrics over sandbox verdicts."""

from jaxrl.evaluation.metrics import GroupMetrics, Metrics, SampleRecord, compute_metrics, format_table, pass_at_k

__all__ = ["GroupMetrics", "Metrics", "SampleRecord", "compute_metrics", "format_table", "pass_at_k"]
