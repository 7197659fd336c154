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


def test_timed_batches_are_split_by_whether_the_server_s_clock_trusted_them():
    line = ("DEBUG timing: waited 1.0 ms for the GPU, held it {held} ms (batch {batch} ms, empty batch 5.0 ms); the "
            "batch checked {checked} runs, the executor's CPU in it {cpu} ms, its median {median} us\n")
    log = (line.format(held=12, batch=8.3, checked=4, cpu=8.0, median=60.0)  # 100 us a run outside: trusted
           + line.format(held=30, batch=25.0, checked=7, cpu=9.0, median=60.0)  # 606 us a run: the floor binds
           + line.format(held=9, batch=4.0, checked=5, cpu=4.0, median=60.0)  # shorter than the empty batch
           + line.format(held=9, batch=4.5, checked=5, cpu=20.0, median=60.0))
    out = bench.batch_summary(log, calls=33)
    assert out["trusted"]["batches"] == 1 and out["trusted"]["outside_us"] == 100.0
    assert out["not trusted"]["batches"] == 3 and out["not trusted"]["checked_runs"] == 5.0
    assert out["not trusted"]["executor_cpu_ms"] == 11.0 and out["not trusted"]["excess_ms"] == -0.5  # mean, median
    assert bench.batch_summary("", calls=33) == {}
