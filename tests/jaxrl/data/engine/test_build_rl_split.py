"""The rl-split target (`data.rl_split_tasks`): a build asked for N tasks of the rl split (GRPO's) gets them
from shards drawn from the rl split alone, never as SFT pairs, deterministically and resumably; unset, the
build is what it was without it."""

from __future__ import annotations

import dataclasses
import json
import math
import random

import pytest
from engine_fakes import FAKE_ENGINE, RL_ENGINE, FakeClient, Interrupt, make_task, read_jsonl, run_build

from jaxrl.data.engine.api import Engine

TARGET = 24
CHUNK = 16
FILES = ("sft.jsonl", "rl_tasks.jsonl", "card.md")


def files(run_dir) -> dict[str, bytes]:
    return {name: (run_dir / name).read_bytes() for name in FILES}


def summary(run_dir) -> dict:
    data = json.loads((run_dir / "summary.json").read_text())
    data.pop("timing")
    return data


def shard_rows(run_dir, pattern: str) -> list[list[dict]]:
    return [read_jsonl(p) for p in sorted((run_dir / "shards").glob(pattern))]


def rl_split(rows: list[dict]) -> list[dict]:
    return [row for row in rows if row["split"] == "rl"]


def test_a_build_with_an_rl_split_target_writes_that_many_rl_split_tasks(tmp_path):
    result = run_build(tmp_path, engine=RL_ENGINE, rl_split_tasks=TARGET)
    rl = read_jsonl(tmp_path / "rl_tasks.jsonl")
    assert len(rl_split(rl)) == TARGET
    assert result.summary["targets"] == {"sft_pairs": 20, "rl_tasks": 30, "rl_split_tasks": TARGET}
    assert result.summary["targets_met"]
    assert result.summary["counts"]["splits"]["rl"]["rl_tasks"] == TARGET
    card = (tmp_path / "card.md").read_text()
    assert f"{TARGET} rl-split tasks; written:" in card and f"({TARGET} rl-split)" in card

    # rl_tasks counts the main stream's tasks of every split; the rl-split target adds its tasks after them.
    main = [o["rl_row"] for shard in shard_rows(tmp_path, "shard-*.jsonl") for o in shard if o["rl_row"]]
    assert rl[:30] == main[:30]
    assert all(row["split"] == "rl" for row in rl[30:])


def test_the_rl_split_tasks_come_from_shards_of_the_rl_split_alone_built_only_as_needed(tmp_path):
    run_build(tmp_path, engine=RL_ENGINE, rl_split_tasks=TARGET)
    main = shard_rows(tmp_path, "shard-*.jsonl")
    rl_shards = shard_rows(tmp_path, "rl-shard-*.jsonl")
    from_main = len([o for shard in main for o in shard if o["rl_row"] and o["split"] == "rl"])
    assert from_main < TARGET  # the main stream alone falls short: ~3% of its tasks are rl-split
    assert {o["split"] for shard in rl_shards for o in shard} == {"rl"}
    counted = [from_main]
    for shard in rl_shards:
        counted.append(counted[-1] + sum(1 for o in shard if o["rl_row"] is not None and o["drop"] is None))
    assert counted[-2] < TARGET <= counted[-1]  # it stopped at the first rl shard that met the target
    assert len(rl_shards) <= math.ceil((TARGET - from_main) / CHUNK) + 1  # a repeat can cost one more shard


def test_rl_split_tasks_are_never_verified_or_written_as_sft_pairs(tmp_path):
    client = FakeClient()
    run_build(tmp_path, client, engine=RL_ENGINE, rl_split_tasks=TARGET, sft_pairs=60)
    sft = read_jsonl(tmp_path / "sft.jsonl")
    rl_ids = {row["task_id"] for row in rl_split(read_jsonl(tmp_path / "rl_tasks.jsonl"))}
    assert {row["split"] for row in sft} == {"train"} and not rl_ids & {row["task_id"] for row in sft}
    assert "sigmoid" in {row["family"] for row in sft}  # the family trains; its rl-split tasks do not
    sizes = [int(candidate.split("# ModelNew for sigmoid ")[1].split()[0])
             for candidate, _, _ in client.evaluated if "# ModelNew for sigmoid " in candidate]
    assert sizes and all(size % 4 for size in sizes)  # no rl-split task's pair was even verified


def test_without_the_target_the_build_is_the_build_without_the_option(tmp_path):
    run_build(tmp_path / "unset", engine=RL_ENGINE)
    run_build(tmp_path / "zero", engine=RL_ENGINE, rl_split_tasks=0)
    run_build(tmp_path / "target", engine=RL_ENGINE, rl_split_tasks=TARGET)
    assert files(tmp_path / "unset") == files(tmp_path / "zero")
    assert summary(tmp_path / "unset") == summary(tmp_path / "zero")
    assert "rl_split_tasks" not in summary(tmp_path / "unset")["targets"]
    assert not list((tmp_path / "unset" / "shards").glob("rl-shard-*"))
    # The target never changes the main stream: same shards, same SFT pairs, the same first rl_tasks rows.
    assert shard_rows(tmp_path / "unset", "shard-*.jsonl") == shard_rows(tmp_path / "target", "shard-*.jsonl")
    assert files(tmp_path / "unset")["sft.jsonl"] == files(tmp_path / "target")["sft.jsonl"]
    unset_rl = read_jsonl(tmp_path / "unset" / "rl_tasks.jsonl")
    assert read_jsonl(tmp_path / "target" / "rl_tasks.jsonl")[: len(unset_rl)] == unset_rl


def test_builds_with_the_target_are_deterministic_for_a_seed(tmp_path):
    run_build(tmp_path / "a", engine=RL_ENGINE, rl_split_tasks=TARGET, concurrency=1)
    run_build(tmp_path / "b", engine=RL_ENGINE, rl_split_tasks=TARGET, concurrency=8)
    assert files(tmp_path / "a") == files(tmp_path / "b")
    assert summary(tmp_path / "a") == summary(tmp_path / "b")
    run_build(tmp_path / "c", engine=RL_ENGINE, rl_split_tasks=TARGET, seed=1)
    rl_of = lambda run: rl_split(read_jsonl(tmp_path / run / "rl_tasks.jsonl"))  # noqa: E731
    assert rl_of("a") != rl_of("c")


def test_an_interrupted_rl_stream_resumes_to_the_same_bytes(tmp_path):
    whole = FakeClient()
    run_build(tmp_path / "whole", whole, engine=RL_ENGINE, rl_split_tasks=TARGET)
    cut = FakeClient(fail_on_call=whole.calls - 3)  # in the last rl shard
    with pytest.raises(Interrupt):
        run_build(tmp_path / "cut", cut, engine=RL_ENGINE, rl_split_tasks=TARGET)
    names = lambda run, pattern: sorted(p.name for p in (tmp_path / run / "shards").glob(pattern))  # noqa: E731
    assert names("cut", "shard-*.jsonl") == names("whole", "shard-*.jsonl")
    assert len(names("cut", "rl-shard-*.jsonl")) < len(names("whole", "rl-shard-*.jsonl"))
    run_build(tmp_path / "cut", engine=RL_ENGINE, rl_split_tasks=TARGET)
    assert files(tmp_path / "cut") == files(tmp_path / "whole")
    assert summary(tmp_path / "cut")["counts"] == summary(tmp_path / "whole")["counts"]


def test_raising_the_targets_extends_a_build_to_the_same_bytes_as_a_fresh_one(tmp_path):
    # The rl target first, then more SFT pairs: the main stream grows past shards the rl stream has already
    # built, and rl shards are read only as far as the target needs.
    run_build(tmp_path / "grown", engine=RL_ENGINE, rl_split_tasks=8)
    run_build(tmp_path / "grown", engine=RL_ENGINE, rl_split_tasks=TARGET)
    run_build(tmp_path / "grown", engine=RL_ENGINE, rl_split_tasks=TARGET, sft_pairs=60)
    run_build(tmp_path / "fresh", engine=RL_ENGINE, rl_split_tasks=TARGET, sft_pairs=60)
    assert files(tmp_path / "grown") == files(tmp_path / "fresh")
    assert summary(tmp_path / "grown")["counts"] == summary(tmp_path / "fresh")["counts"]


def test_max_tasks_bounds_both_streams_and_a_short_target_is_reported(tmp_path, caplog):
    result = run_build(tmp_path, engine=RL_ENGINE, sft_pairs=4, rl_tasks=4, rl_split_tasks=200, max_tasks=4 * CHUNK)
    assert len(shard_rows(tmp_path, "shard-*.jsonl")) == 1 and len(shard_rows(tmp_path, "rl-shard-*.jsonl")) == 3
    assert result.summary["counts"]["generated"] == 4 * CHUNK and not result.summary["targets_met"]
    assert "rl-split tasks" in caplog.text and "/200 rl-split tasks" in caplog.text


def test_an_engine_that_cannot_draw_one_split_refuses_the_target(tmp_path):
    no_split = Engine(*(getattr(FAKE_ENGINE, f) for f in ("generate_tasks", "list_families", "decontaminator",
                                                           "splitter")))
    with pytest.raises(ValueError, match="rl_split_tasks"):
        run_build(tmp_path, engine=no_split, rl_split_tasks=4)


def small_sizes(heldout, val, split):
    """A split generator with few sizes: its tasks repeat the main stream's rl-split ones (sigmoid 4..36)."""
    def generate(seed, count, scale="full", families=None):
        rng = random.Random(seed)
        return [make_task("sigmoid", rng.choice(range(4, 40, 4)), f"{seed:x}-{i}", scale) for i in range(count)]
    return generate


def test_an_rl_stream_task_repeating_a_main_stream_task_is_dropped_not_written_twice(tmp_path):
    engine = dataclasses.replace(RL_ENGINE, split_generator=small_sizes)
    result = run_build(tmp_path, engine=engine, rl_split_tasks=9, sft_pairs=60)
    rl = rl_split(read_jsonl(tmp_path / "rl_tasks.jsonl"))
    assert len(rl) == 9 and len({row["code"] for row in rl}) == 9
    drops = {(d["stage"], d["reason"]) for d in result.summary["counts"]["drops"]}
    assert ("duplicate", "repeats a task of the main stream") in drops


def test_a_split_generator_drawing_another_splits_tasks_is_refused(tmp_path):
    def strays(heldout, val, split):
        return lambda seed, count, scale="full", families=None: [
            make_task("sigmoid", 5 + 4 * i, f"{seed:x}-{i}", scale) for i in range(count)]

    with pytest.raises(RuntimeError, match=r"rl stream's generator drew tasks of the \['train'\] split"):
        run_build(tmp_path, engine=dataclasses.replace(RL_ENGINE, split_generator=strays), rl_split_tasks=40)
