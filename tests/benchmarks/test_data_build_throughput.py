"""The data-build benchmark's measures, on made-up build logs and shard files."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest

from benchmark_scripts import load_benchmark

bench = load_benchmark("data_build_throughput")


def test_the_steady_pace_leaves_out_the_first_shard():
    lines = [(3.0, "KernelBench: found\n"),
             (40.0, "shard 0: SFT pairs 74/10000, RL tasks 99/2000, 25 s (0 shards resumed)\n"),
             (55.0, "shard 1: SFT pairs 148/10000, RL tasks 201/2000, 40 s (0 shards resumed)\n"),
             (70.0, "shard 2: SFT pairs 226/10000, RL tasks 300/2000, 55 s (0 shards resumed)\n")]
    rows = bench.parse_shard_lines(lines)
    assert [r["sft_pairs"] for r in rows] == [74, 148, 226] and rows[-1]["elapsed_s"] == 70.0
    pace = bench.pace(rows)
    assert pace["steady_pairs_per_minute"] == pytest.approx(60 * 152 / 30, abs=0.1)
    assert pace["pairs_per_minute"] == pytest.approx(60 * 226 / 70, abs=0.1)
    assert pace["shards"] == 3 and pace["rl_tasks"] == 300


def test_a_build_that_finished_no_shard_has_no_pace():
    assert bench.pace(bench.parse_shard_lines([(5.0, "error: no GPU\n")]))["steady_pairs_per_minute"] is None
    one = bench.parse_shard_lines([(30.0, "shard 0: SFT pairs 70/100, RL tasks 90/100, 20 s\n")])
    assert bench.pace(one)["steady_pairs_per_minute"] is None and bench.pace(one)["pairs_per_minute"] == 140.0


def test_shard_files_give_each_shards_pairs_and_stage_times(tmp_path):
    shards = tmp_path / "shards"
    shards.mkdir()
    (shards / "shard-00000.timing.json").write_text(json.dumps(
        {"shard": 0, "stages_s": {"validate": 4.04, "verify": 6.5}, "wall_s": 11.2, "stage_ends_s": {"verify": 11.0}}))
    rows = [{"sft_row": {"prompt": "p"}}, {"sft_row": None}]
    (shards / "shard-00000.jsonl").write_text("\n".join(json.dumps(r) for r in rows))
    assert bench.shard_stages(tmp_path) == [{"shard": 0, "sft_pairs": 1, "wall_s": 11.2,
                                             "stages_s": {"validate": 4.0, "verify": 6.5},
                                             "stage_ends_s": {"verify": 11.0}}]


def test_stopping_a_build_stops_its_whole_process_group():
    # A parent and a child of its own in one process group, as the build and its embedded server.
    script = ("import subprocess, sys, time; "
              "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']); time.sleep(60)")
    process = subprocess.Popen([sys.executable, "-c", script], start_new_session=True)
    for _ in range(50):
        if len(bench.group_members(process.pid)) == 2:
            break
        time.sleep(0.1)
    assert len(bench.group_members(process.pid)) == 2
    bench.stop_group(process.pid, grace_s=10)
    process.wait(timeout=10)
    assert bench.group_members(process.pid) == []


def test_cpu_roles_count_only_the_tree_under_the_root():
    process_cpu = load_benchmark("process_cpu")
    assert process_cpu.descendants(10, {11: 10, 12: 11, 13: 1, 14: 13}) == {10, 11, 12}
