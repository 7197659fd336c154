"""Shards and resume: an interrupted build leaves no partial output and resumes to the same bytes as an
uninterrupted one; shards built with other settings are refused; raising the targets extends a build."""

from __future__ import annotations

import json

import pytest
from engine_fakes import FakeClient, Interrupt, run_build

from jaxrl.data.engine import writing
from jaxrl.data.engine.shards import FingerprintMismatch

OUTPUTS = ("sft.jsonl", "rl_tasks.jsonl", "card.md", "summary.json")


def files(run_dir) -> dict[str, bytes]:
    return {name: (run_dir / name).read_bytes() for name in OUTPUTS if name != "summary.json"}


def counts(run_dir) -> dict:
    return json.loads((run_dir / "summary.json").read_text())["counts"]


def leftovers(run_dir) -> list[str]:
    return sorted(p.name for p in run_dir.rglob(f"{writing.TMP_PREFIX}*"))


def test_an_interrupted_build_resumes_to_the_same_bytes_as_an_uninterrupted_one(tmp_path):
    whole = tmp_path / "whole"
    run_build(whole)
    shards = sorted(p.name for p in (whole / "shards").glob("shard-*.jsonl"))
    assert len(shards) >= 3

    cut = tmp_path / "cut"
    client = FakeClient(fail_on_call=60)  # well into the build, after some shards are done
    with pytest.raises(Interrupt):
        run_build(cut, client)
    assert not any((cut / name).exists() for name in OUTPUTS) and leftovers(cut) == []
    done = sorted(p.name for p in (cut / "shards").glob("shard-*.jsonl"))
    assert 0 < len(done) < len(shards) and done == shards[: len(done)]
    for name in done:  # finished shards are whole: the same lines as the uninterrupted build's
        assert (cut / "shards" / name).read_bytes() == (whole / "shards" / name).read_bytes()

    rerun = FakeClient()
    result = run_build(cut, rerun)
    assert result.summary["timing"]["shards_resumed"] == len(done)
    assert files(cut) == files(whole)
    assert counts(cut) == counts(whole)
    finished = [json.loads(line) for name in done for line in (cut / "shards" / name).read_text().splitlines()]
    redone = [row["task_id"] for row in finished if row["rl_row"] and rerun.validations[row["rl_row"]["code"]]]
    assert redone == []  # the finished shards' references were not validated again


def test_an_interruption_while_writing_the_outputs_leaves_none_of_them(tmp_path, monkeypatch):
    run_build(tmp_path / "whole")
    real = writing._write_temporary

    def interrupted(path, text):
        if path.name == "card.md":  # sft.jsonl and rl_tasks.jsonl are written (under temporary names) by then
            raise KeyboardInterrupt
        return real(path, text)

    monkeypatch.setattr(writing, "_write_temporary", interrupted)
    run_dir = tmp_path / "run"
    with pytest.raises(KeyboardInterrupt):
        run_build(run_dir)
    assert not any((run_dir / name).exists() for name in OUTPUTS) and leftovers(run_dir) == []
    monkeypatch.setattr(writing, "_write_temporary", real)
    run_build(run_dir)
    assert files(run_dir) == files(tmp_path / "whole")


def test_shards_built_with_other_settings_are_refused(tmp_path):
    with pytest.raises(Interrupt):
        run_build(tmp_path, FakeClient(fail_on_call=60))
    with pytest.raises(FingerprintMismatch, match=r"seed: 0 there, 1 now.*pick another run.name"):
        run_build(tmp_path, seed=1)
    with pytest.raises(FingerprintMismatch, match=r"chunk_size: 16 there, 8 now"):
        run_build(tmp_path, chunk_size=8)
    # What does not change a shard's content (targets, budget, token limit, concurrency) is no mismatch.
    run_build(tmp_path, sft_pairs=5, rl_tasks=5, max_tokens=5000, concurrency=2)


def test_raising_the_targets_extends_a_finished_build(tmp_path):
    small = run_build(tmp_path / "grown", sft_pairs=5, rl_tasks=5)
    grown = run_build(tmp_path / "grown", sft_pairs=40, rl_tasks=40)
    assert grown.summary["timing"]["shards_resumed"] == small.stats.shards
    run_build(tmp_path / "fresh", sft_pairs=40, rl_tasks=40)
    assert files(tmp_path / "grown") == files(tmp_path / "fresh")


def test_a_stale_temporary_file_from_a_killed_run_is_swept(tmp_path):
    (tmp_path / "shards").mkdir(parents=True)
    stale = tmp_path / "shards" / f"{writing.TMP_PREFIX}123-shard-00000.jsonl"
    stale.write_text("half a line")
    run_build(tmp_path)
    assert not stale.exists() and leftovers(tmp_path) == []


def test_compiling_later_shards_ahead_changes_no_output_and_skips_repeats(tmp_path, monkeypatch):
    from jaxrl.data.engine import build as build_module

    ahead = tmp_path / "ahead"
    client = FakeClient(with_inductor=True)
    compiled, leads = [], []
    compile_ahead = build_module._ShardBuilder._compile_ahead

    def recorded(self, index, later, seen):
        leads.append(later - index)
        compiled.append(compile_ahead(self, index, later, seen))
        return compiled[-1]

    monkeypatch.setattr(build_module._ShardBuilder, "_compile_ahead", recorded)
    asked: list[str] = []
    compile_ = client.inductor
    client.inductor = lambda reference, *a, **k: (asked.append(reference), compile_(reference, *a, **k))[1]
    run_build(ahead, client, gpu=True, inductor=True, sft_pairs=60)
    assert sum(len(results) for results in compiled) > 0  # shards were compiled ahead
    assert len(asked) == len(set(asked))  # and used what was compiled ahead instead of compiling it again
    assert max(leads) == build_module.INDUCTOR_AHEAD_SHARDS  # as many shards ahead as the build says
    earlier = [set(results) for results in compiled]
    assert all(not (a & b) for k, a in enumerate(earlier) for b in earlier[k + 1:])  # no reference twice

    alone = tmp_path / "alone"
    monkeypatch.setattr(build_module._ShardBuilder, "_compile_ahead", lambda self, *args: {})
    run_build(alone, FakeClient(with_inductor=True), gpu=True, inductor=True, sft_pairs=60)
    assert files(ahead) == files(alone) and counts(ahead) == counts(alone)
