"""The RL-sized throughput benchmark's reading of the server's log."""

from __future__ import annotations

from benchmark_scripts import load_benchmark

bench = load_benchmark("sandbox_rl_throughput")


def test_the_executor_s_cpu_is_averaged_per_job_by_stage():
    log = ("DEBUG executor 12 CPU ms by stage: between jobs 10, inputs_ready 30, trial_outputs 120, timing 5\n"
           "DEBUG timing: waited 3.0 ms for the GPU, held it 12.0 ms (batch 9.0 ms)\n"
           "DEBUG executor 13 CPU ms by stage: inputs_ready 50, trial_outputs 100\n")
    assert bench.executor_cpu_summary(log) == {"between jobs": 5.0, "inputs_ready": 40.0, "trial_outputs": 110.0,
                                               "timing": 2.5, "jobs": 2}
    assert bench.executor_cpu_summary("no executor lines") == {}
